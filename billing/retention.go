package billing

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// Retention deletes usage rows older than Keep, in small batches, for one
// configuration: started with Start, drained with Stop. Several
// configurations alive during a reload may each run one; the deletes are
// idempotent. Each day's totals per user and model stay in the store's
// daily table, so spend history outlives the rows.
type Retention struct {
	Store store.Store
	// Keep is how long a usage row is kept.
	Keep time.Duration
	// Interval is how often old rows are looked for. Default 1h.
	Interval time.Duration
	// BatchSize is how many rows one delete removes, so the store's write
	// lock is never held for long. Default 1000.
	BatchSize int
	// Pause is the rest between two batches, in which usage rows get
	// written. Default 50ms.
	Pause time.Duration
	// Deleted, when set, is told each batch's rows (for metrics).
	Deleted func(rows int64)
	Log     *zap.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start sweeps at once, then every Interval, until Stop.
func (r *Retention) Start() {
	if r.Interval <= 0 {
		r.Interval = time.Hour
	}
	if r.BatchSize <= 0 {
		r.BatchSize = 1000
	}
	if r.Pause <= 0 {
		r.Pause = 50 * time.Millisecond
	}
	if r.Log == nil {
		r.Log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go r.run(ctx)
}

// Stop ends the sweeping and waits for a batch in progress.
func (r *Retention) Stop() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
}

func (r *Retention) run(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.Interval)
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

// RetentionLock names the lock that lets one instance at a time sweep a
// database several instances share.
const RetentionLock = "usage retention"

// sweep deletes every row older than the window, a batch at a time. The
// cutoff is fixed at the start so a sweep ends even under load. On a store
// several instances share (a store.Locker) the sweep runs on the instance
// that takes the retention lock; the others skip that round.
func (r *Retention) sweep(ctx context.Context) {
	if l, ok := r.Store.(store.Locker); ok {
		release, held, err := l.TryLock(ctx, RetentionLock)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.Log.Warn("usage retention: taking the retention lock failed; trying again at the next interval", zap.Error(err))
			}
			return
		case !held:
			r.Log.Debug("usage retention: another instance is sweeping; skipping this round")
			return
		}
		defer release()
	}
	cutoff := time.Now().Add(-r.Keep)
	var total int64
	if days, ok := r.Store.(store.UsageDays); ok {
		// whole days at once; a failure leaves them to the batches below
		n, err := days.DropUsageDays(ctx, cutoff)
		if err != nil && ctx.Err() == nil {
			r.Log.Warn("usage retention: dropping expired days failed; deleting their rows in batches instead", zap.Error(err))
		}
		if n > 0 {
			total += n
			if r.Deleted != nil {
				r.Deleted(n)
			}
		}
	}
	for ctx.Err() == nil {
		n, err := r.Store.DeleteUsageBefore(ctx, cutoff, r.BatchSize)
		if err != nil {
			if ctx.Err() == nil {
				r.Log.Warn("usage retention: deleting old rows failed; trying again at the next interval", zap.Error(err))
			}
			break
		}
		if n == 0 {
			break
		}
		total += n
		if r.Deleted != nil {
			r.Deleted(n)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.Pause):
		}
	}
	if total > 0 {
		r.Log.Info("usage retention: deleted old usage rows", zap.Int64("rows", total), zap.Time("before", cutoff))
	}
}
