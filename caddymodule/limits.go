package caddymodule

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// LimitsConfig is the gateway-wide default rate limits of every key; a
// token or user can carry its own (caddy gateway token set --rpm ...).
// Zero means no limit.
type LimitsConfig = store.Limits

// UsageConfig tunes the usage writer. The writer belongs to the database
// and outlives reloads: the first configuration to open a database sets it.
type UsageConfig struct {
	// Journal is the append-only file usage rows go to while the database
	// refuses writes. Default: beside the SQLite file, <db>.usage-journal;
	// for PostgreSQL, in Caddy's data directory (see gatewaydb.DefaultJournal).
	Journal string `json:"journal,omitempty"`
	// QueueSize bounds usage rows not yet recorded; a request that finds
	// it full is answered 503 at once. Default 16384.
	QueueSize int `json:"queue_size,omitempty"`
	// Linger is how long a batch waits for more rows. Default 50ms; a row
	// waiting for its commit is safe from kill -9 in the inflight log.
	Linger caddy.Duration `json:"linger,omitempty"`
	// RetryInterval is how often a database that refused writes is tried
	// again. Default 1s.
	RetryInterval caddy.Duration `json:"retry_interval,omitempty"`
	// CommitTimeout bounds one commit. Default 10s.
	CommitTimeout caddy.Duration `json:"commit_timeout,omitempty"`
}

func (uc *UsageConfig) writerConfig(repl *caddy.Replacer) billing.WriterConfig {
	if uc == nil {
		return billing.WriterConfig{}
	}
	return billing.WriterConfig{
		Journal:       repl.ReplaceAll(uc.Journal, ""),
		QueueSize:     uc.QueueSize,
		Linger:        time.Duration(uc.Linger),
		RetryInterval: time.Duration(uc.RetryInterval),
		CommitTimeout: time.Duration(uc.CommitTimeout),
	}
}

// parseLimits reads `limits { rpm <n> tpm <n> max_parallel <n> }`.
func parseLimits(d *caddyfile.Dispenser) (*LimitsConfig, error) {
	lc := &LimitsConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		if err := billing.SetLimit(lc, opt, v); err != nil {
			return d.WrapErr(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lc, nil
}

// parseUsage reads `usage { journal <path> queue_size <n> linger <d>
// retry_interval <d> commit_timeout <d> }`.
func parseUsage(d *caddyfile.Dispenser) (*UsageConfig, error) {
	uc := &UsageConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		dur := func(into *caddy.Duration) error {
			t, err := caddy.ParseDuration(v)
			if err != nil || t <= 0 {
				return d.Errf("usage: %s must be a positive duration, not %q", opt, v)
			}
			*into = caddy.Duration(t)
			return nil
		}
		var err error
		switch opt {
		case "journal":
			uc.Journal = v
		case "queue_size":
			n, convErr := strconv.Atoi(v)
			if convErr != nil || n <= 0 {
				return d.Errf("usage: queue_size must be a positive integer, not %q", v)
			}
			uc.QueueSize = n
		case "linger":
			err = dur(&uc.Linger)
		case "retry_interval":
			err = dur(&uc.RetryInterval)
		case "commit_timeout":
			err = dur(&uc.CommitTimeout)
		default:
			return d.Errf("usage: unrecognized option %q", opt)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return uc, nil
}
