package tasks

import "time"

// Config tunes how submitted tasks are followed; a zero field takes its
// default.
type Config struct {
	// MaxAge is how long a task may run; past it, it fails and is
	// refunded. Default 24h.
	MaxAge time.Duration
	// PollInterval is the wait before a task's first poll and the base of
	// its backoff; a status call refreshes a task older than it. Default 5s.
	PollInterval time.Duration
	// MaxPollInterval caps the backoff between two polls. Default 1m (and
	// never below PollInterval).
	MaxPollInterval time.Duration
	// PollTimeout bounds one poll of the upstream. Default 30s.
	PollTimeout time.Duration
	// Concurrency bounds the polls in flight at once. Default 16.
	Concurrency int
	// Lease is how long an instance holds a task it polls; a task held by
	// an instance that died is taken up by another after it. Default 2m.
	Lease time.Duration
	// MaxFileSize bounds one file streamed from an upstream to a client.
	// Default 2 GiB.
	MaxFileSize int64

	// Batches and files (/v1/files, /v1/batches, /v1/messages/batches).
	// BatchDir is where files' bytes are kept (the caller sets it beside
	// the database). MaxBatchFile bounds one file (default 100 MiB),
	// MaxBatchLines the requests of one batch (default 50,000),
	// MaxBatchResults the results read back from a vendor (default 1
	// GiB); FileRetention is how long a file is kept (default 30 days,
	// negative: for ever).
	BatchDir        string
	MaxBatchFile    int64
	MaxBatchLines   int
	MaxBatchResults int64
	FileRetention   time.Duration
	// MaxUserFiles bounds the bytes of one user's files together
	// (default 10 GiB).
	MaxUserFiles int64
	// LocalConcurrency bounds the lines of one batch the gateway runs at
	// once on its own engine (a model without a batch API). Default 4.
	LocalConcurrency int
}

// withDefaults is c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.MaxAge <= 0 {
		c.MaxAge = 24 * time.Hour
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.MaxPollInterval <= 0 {
		c.MaxPollInterval = time.Minute
	}
	c.MaxPollInterval = max(c.MaxPollInterval, c.PollInterval)
	if c.PollTimeout <= 0 {
		c.PollTimeout = 30 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Lease <= 0 {
		c.Lease = 2 * time.Minute
	} else {
		// a lease outlasts the poll it covers
		c.Lease = max(c.Lease, c.PollTimeout+5*time.Second)
	}
	if c.MaxFileSize <= 0 {
		c.MaxFileSize = 2 << 30
	}
	if c.BatchDir == "" {
		c.BatchDir = "./data/files"
	}
	if c.MaxBatchFile <= 0 {
		c.MaxBatchFile = 100 << 20
	}
	if c.MaxBatchLines <= 0 {
		c.MaxBatchLines = 50_000
	}
	if c.MaxBatchResults <= 0 {
		c.MaxBatchResults = 1 << 30
	}
	if c.LocalConcurrency <= 0 {
		c.LocalConcurrency = 4
	}
	if c.MaxUserFiles <= 0 {
		c.MaxUserFiles = 10 << 30
	}
	if c.FileRetention == 0 {
		c.FileRetention = 30 * 24 * time.Hour
	}
	return c
}
