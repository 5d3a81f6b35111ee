package billing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// Writer commits usage rows, and with them the costs they charge, through
// one goroutine that groups whatever has queued into a single transaction.
// Under load a batch holds hundreds of rows, so the store sees a few commits
// a second however many requests are served. It never drops a row: when the
// queue is full, Write waits; when a commit fails, the batch is retried.
type Writer struct {
	st       store.Store
	ledger   *Ledger
	log      *zap.Logger
	queue    chan *store.UsageLog
	maxBatch int
	linger   time.Duration

	mu     sync.RWMutex
	closed bool
	done   chan struct{}

	// what health checks and metrics read, written only by commit
	writeErrors  atomic.Uint64
	failingSince atomic.Int64 // unix nanoseconds; 0 while commits succeed
	onCommit     atomic.Pointer[func(time.Duration, int, error)]
}

// QueueDepth is how many rows wait to be committed, of QueueCap at most.
func (w *Writer) QueueDepth() int { return len(w.queue) }

// QueueCap is how many rows the queue holds before Write waits.
func (w *Writer) QueueCap() int { return cap(w.queue) }

// WriteErrors counts commit attempts that failed.
func (w *Writer) WriteErrors() uint64 { return w.writeErrors.Load() }

// FailingSince is when the current run of failed commits began; ok is
// false while the last commit succeeded.
func (w *Writer) FailingSince() (since time.Time, ok bool) {
	ns := w.failingSince.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// OnCommit sets a function told of every commit attempt: how long it took,
// how many rows it held and whether it failed. It replaces any before it.
func (w *Writer) OnCommit(f func(took time.Duration, rows int, err error)) {
	w.onCommit.Store(&f)
}

// NewWriter starts a writer.
func NewWriter(st store.Store, ledger *Ledger, log *zap.Logger) *Writer {
	w := &Writer{
		st:       st,
		ledger:   ledger,
		log:      log,
		queue:    make(chan *store.UsageLog, 1<<14),
		maxBatch: 1024,
		linger:   5 * time.Millisecond,
		done:     make(chan struct{}),
	}
	go w.run()
	return w
}

// Write queues a row; its Cost is charged when the row is committed. After
// Close it commits the row at once, so a request that outlives the writer
// still gets recorded.
func (w *Writer) Write(row *store.UsageLog) {
	w.mu.RLock()
	if !w.closed {
		w.queue <- row
		w.mu.RUnlock()
		return
	}
	w.mu.RUnlock()
	w.commit([]*store.UsageLog{row}, 5)
}

// Close stops accepting rows into the queue, commits everything queued and
// returns when it is written.
func (w *Writer) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.closed = true
	close(w.queue)
	w.mu.Unlock()
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*store.UsageLog, 0, w.maxBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for row := range w.queue {
		// wait a moment for more rows, so that even a light load commits
		// many rows a transaction instead of one
		batch = append(batch[:0], row)
		linger.Reset(w.linger)
	fill:
		for len(batch) < w.maxBatch {
			select {
			case r, ok := <-w.queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		w.commit(batch, -1)
	}
}

// commit writes a batch, retrying with backoff; tries < 0 retries until it
// succeeds. Rows that still cannot be written are logged in full, so an
// operator can replay them.
func (w *Writer) commit(batch []*store.UsageLog, tries int) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := w.st.SettleBatch(context.Background(), batch)
		if f := w.onCommit.Load(); f != nil {
			(*f)(time.Since(start), len(batch), err)
		}
		if err == nil {
			w.failingSince.Store(0)
			break
		}
		w.writeErrors.Add(1)
		w.failingSince.CompareAndSwap(0, start.UnixNano())
		if tries >= 0 && attempt >= tries {
			for _, r := range batch {
				w.log.Error("usage row could not be written", zap.Error(err), zap.Any("row", r))
			}
			return
		}
		w.log.Warn("writing usage rows failed; retrying", zap.Int("rows", len(batch)), zap.Int("attempt", attempt), zap.Error(err))
		time.Sleep(backoff)
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
	users := make(map[int64]int64)
	tokens := make(map[int64]int64)
	for _, r := range batch {
		users[r.UserID] += r.Cost
		if r.TokenID != 0 {
			tokens[r.TokenID] += r.Cost
		}
	}
	w.ledger.Committed(users, tokens)
}
