package caddymodule

import (
	"context"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
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

// retention deletes usage rows past the window, in small batches, for one
// app instance: started in Start, drained in Stop. Several configurations
// alive during a reload may each run one; the deletes are idempotent.
type retention struct {
	cfg    RetentionConfig
	db     *database
	log    *zap.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *retention) start() {
	if r.cfg.Interval <= 0 {
		r.cfg.Interval = caddy.Duration(time.Hour)
	}
	if r.cfg.BatchSize <= 0 {
		r.cfg.BatchSize = 1000
	}
	if r.cfg.Pause <= 0 {
		r.cfg.Pause = caddy.Duration(50 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go r.run(ctx)
}

func (r *retention) stop() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
}

func (r *retention) run(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(time.Duration(r.cfg.Interval))
	defer t.Stop()
	for {
		r.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep deletes every row older than the window, a batch at a time. The
// cutoff is fixed at the start so a sweep ends even under load.
func (r *retention) sweep(ctx context.Context) {
	cutoff := time.Now().Add(-time.Duration(r.cfg.Usage))
	var total int64
	for ctx.Err() == nil {
		n, err := r.db.store.DeleteUsageBefore(ctx, cutoff, r.cfg.BatchSize)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("usage retention: deleting old rows failed; trying again at the next interval", zap.Error(err))
			}
			break
		}
		if n == 0 {
			break
		}
		total += n
		r.db.metrics.RetentionDeleted.Add(float64(n))
		r.db.metrics.RetentionBatches.Inc()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(r.cfg.Pause)):
		}
	}
	if total > 0 {
		r.log.Info("usage retention: deleted old usage rows", zap.Int64("rows", total), zap.Time("before", cutoff))
	}
}
