package caddymodule

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
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

// retentionLock names the lock that lets one instance at a time sweep a
// database several instances share.
const retentionLock = "usage retention"

// retentionWorker is a configuration's retention worker. On a store that
// several instances share (a store.Locker), each sweep runs on the
// instance that takes the retention lock; the others skip that round.
type retentionWorker struct {
	*billing.Retention
	lock *sweepLock // nil on a store of one machine
}

// Stop ends the sweeping and gives the lock back if a sweep held it.
func (w *retentionWorker) Stop() {
	w.Retention.Stop()
	if w.lock != nil {
		w.lock.drop()
	}
}

// sweeper is this configuration's retention worker on db, its batches
// counted in the database's metrics.
func (c RetentionConfig) sweeper(db *database, log *zap.Logger) *retentionWorker {
	w := &retentionWorker{Retention: &billing.Retention{Store: db.store, Keep: time.Duration(c.Usage), Interval: time.Duration(c.Interval),
		BatchSize: c.BatchSize, Pause: time.Duration(c.Pause), Log: log,
		Deleted: func(rows int64) {
			db.metrics.RetentionDeleted.Add(float64(rows))
			db.metrics.RetentionBatches.Inc()
		}}}
	if l, ok := db.store.(store.Locker); ok {
		w.lock = &sweepLock{Store: db.store, locker: l, log: log}
		w.Retention.Store = w.lock
	}
	return w
}

// sweepLock is the store as retention sees it on a shared database: the
// first delete of a sweep takes the lock, or finds another instance
// sweeping and deletes nothing (which ends this instance's sweep); the
// sweep's last delete (no rows left, or an error) gives it back. Only the
// retention worker's goroutine calls it, and Stop after that has ended.
type sweepLock struct {
	store.Store
	locker  store.Locker
	log     *zap.Logger
	release func()
}

func (l *sweepLock) DeleteUsageBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	if l.release == nil {
		release, ok, err := l.locker.TryLock(ctx, retentionLock)
		if err != nil {
			return 0, fmt.Errorf("taking the retention lock: %w", err)
		}
		if !ok {
			l.log.Debug("usage retention: another instance is sweeping; skipping this round")
			return 0, nil
		}
		l.release = release
	}
	n, err := l.Store.DeleteUsageBefore(ctx, before, limit)
	if n == 0 || err != nil {
		l.drop()
	}
	return n, err
}

// drop gives the lock back, if held.
func (l *sweepLock) drop() {
	if l.release != nil {
		l.release()
		l.release = nil
	}
}
