package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
)

// RetentionConfig bounds how long usage rows are kept. Each day's totals
// per user and model stay in the store's daily table, so spend history
// outlives the rows.
type RetentionConfig struct {
	// Usage is how long a usage row is kept; 0 (the default) keeps them
	// all. The Caddyfile's usage_retention 90d sets it.
	Usage caddy.Duration `json:"usage,omitempty"`
	// Interval is how often old rows are looked for. Default 1h.
	Interval caddy.Duration `json:"interval,omitempty"`
	// BatchSize is how many rows one delete statement removes, so the
	// store's write lock is never held for long. Default 1000.
	BatchSize int `json:"batch_size,omitempty"`
	// Pause is the rest between two batches, in which usage rows get
	// written. Default 50ms.
	Pause caddy.Duration `json:"pause,omitempty"`
}

// sweeper is this configuration's retention worker on db, its batches
// counted in the database's metrics.
func (c RetentionConfig) sweeper(db *database, log *zap.Logger) *billing.Retention {
	return &billing.Retention{Store: db.Store, Keep: time.Duration(c.Usage), Interval: time.Duration(c.Interval),
		BatchSize: c.BatchSize, Pause: time.Duration(c.Pause), Log: log,
		Deleted: func(rows int64) {
			db.Metrics.RetentionDeleted.Add(float64(rows))
			db.Metrics.RetentionBatches.Inc()
		}}
}
