package billing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// Errors Admit returns; the relay answers both with 503 and Retry-After.
var (
	// ErrQueueFull: every slot of the writer's queue holds a row not yet
	// recorded, so a new request could not be recorded without waiting.
	ErrQueueFull = errors.New("usage queue full")
	// ErrUnavailable: neither the store nor the journal takes rows, so a
	// priced request could not be billed.
	ErrUnavailable = errors.New("billing unavailable")
)

// WriterConfig tunes a Writer; zero fields take the defaults.
type WriterConfig struct {
	// Journal is the path of the append-only file rows go to while the
	// store refuses writes. Without one, rows wait in memory.
	Journal string
	// QueueSize bounds the rows admitted but not yet recorded (committed
	// or journaled). Default 16384.
	QueueSize int
	// MaxBatch bounds the rows of one transaction. Default 1024.
	MaxBatch int
	// Linger is how long the first row of a batch waits for company.
	// Default 50ms.
	Linger time.Duration
	// RetryInterval is how often a store that refused writes is tried
	// again. Default 1s.
	RetryInterval time.Duration
	// CommitTimeout bounds one commit. Default 10s.
	CommitTimeout time.Duration
}

func (c *WriterConfig) defaults() {
	if c.QueueSize <= 0 {
		c.QueueSize = 1 << 14
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.Linger <= 0 {
		c.Linger = 50 * time.Millisecond
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 10 * time.Second
	}
}

// Writer commits usage rows, and with them the costs they charge, through
// one goroutine that groups whatever has queued into a single transaction.
// Under load a batch holds hundreds of rows, so the store sees a few commits
// a second however many requests are served.
//
// Every row is recorded exactly once, and nothing waits for it:
//
//	slots taken = rows queued + rows held in memory <= QueueSize
//
// A request takes a slot at admission (Admit) and its row gives it back
// once committed to the store or synced to the journal, so Write never
// blocks. With a journal configured, Write first appends the row to an
// inflight log beside it (one unsynced write), so a process killed before
// the commit loses no row of an answer it sent: the next start replays it. When the store refuses a batch it goes to the journal, and so does
// every later batch until the journal has been replayed into the store (one
// order, no row in both). When the journal refuses too, rows are held in
// memory, still holding their slots, and priced requests are refused until
// one of the two takes writes again.
type Writer struct {
	st     store.Store
	ledger *Ledger
	log    *zap.Logger
	cfg    WriterConfig
	queue  chan queued
	slots  atomic.Int64
	prefix string
	seq    atomic.Uint64

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	done   chan struct{}

	pmu      sync.Mutex // the state below; held by one persist at a time
	journal  *Journal
	inflight *inflightLog // nil without a journal
	heldSegs []*segment   // the inflight segments of held rows

	inflightFailing atomic.Bool           // the inflight log refused the last row
	degraded        bool                  // the store refused: rows go to the journal
	held            []*store.UsageLog     // rows neither store nor journal took
	stuck           atomic.Bool           // len(held) > 0, for Admit
	journaled       atomic.Bool           // degraded, for health
	lastErr         atomic.Pointer[error] // why, for logs and health

	// what health checks and metrics read, written only by commit
	writeErrors  atomic.Uint64
	failingSince atomic.Int64 // unix nanoseconds; 0 while commits succeed
	onCommit     atomic.Pointer[func(time.Duration, int, error)]
	committed    atomic.Pointer[func([]*store.UsageLog)]
}

// queued is a row and the inflight segment holding it (nil: none).
type queued struct {
	row *store.UsageLog
	seg *segment
}

// QueueDepth is how many rows are admitted and not yet recorded, of
// QueueCap at most.
func (w *Writer) QueueDepth() int { return int(w.slots.Load()) }

// QueueCap is how many rows may be admitted and not yet recorded.
func (w *Writer) QueueCap() int { return w.cfg.QueueSize }

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

// OnCommitted sets a function told of the rows each commit stored (not
// those a replay found stored before), once they are in the store, on the
// writer's goroutine: it must not block. It replaces any before it; the
// returned function unsets it unless another was set since (a reload's
// new configuration sets its own before the old one stops).
func (w *Writer) OnCommitted(f func(rows []*store.UsageLog)) (unset func()) {
	p := &f
	w.committed.Store(p)
	return func() { w.committed.CompareAndSwap(p, nil) }
}

// NewWriter starts a writer. If the journal holds rows from an earlier run,
// they are replayed first; if the store refuses them, they stay journaled
// and their costs count as unflushed in the ledger until it takes them.
func NewWriter(st store.Store, ledger *Ledger, log *zap.Logger, cfg WriterConfig) *Writer {
	cfg.defaults()
	var p [6]byte
	_, _ = rand.Read(p[:])
	w := &Writer{
		st:     st,
		ledger: ledger,
		log:    log,
		cfg:    cfg,
		queue:  make(chan queued, cfg.QueueSize),
		prefix: hex.EncodeToString(p[:]) + "-",
		done:   make(chan struct{}),
	}
	if cfg.Journal != "" {
		w.journal = OpenJournal(cfg.Journal)
		w.adoptInflight()
		w.inflight = newInflightLog(cfg.Journal, w.prefix)
		if rows, bad, err := w.journal.Rows(); err != nil || len(rows) > 0 || bad > 0 {
			w.degraded = true
			w.journaled.Store(true)
			if !w.replay() {
				// still journaled: count those costs against their owners
				for _, r := range rows {
					ledger.Owe(r.UserID, r.TokenID, Charged(r))
				}
			}
		}
	}
	go w.run()
	return w
}

// Admit takes a queue slot for a request's row. It fails with ErrQueueFull
// when every slot is taken, and, for a priced request, with ErrUnavailable
// while rows can be neither committed nor journaled. A request admitted
// must Write exactly one row.
func (w *Writer) Admit(priced bool) error {
	if priced && w.stuck.Load() {
		return ErrUnavailable
	}
	if w.slots.Add(1) > int64(w.cfg.QueueSize) {
		w.slots.Add(-1)
		return ErrQueueFull
	}
	return nil
}

// rowKey is prefix and then n in base 36, zero-padded to the width of the
// largest uint64, so that one writer's keys sort in the order written: the
// usage table's unique index on them then grows at its end, a batch's
// keys in one or two pages, instead of spread over every page holding the
// writer's keys ("z" sorts after "10").
func rowKey(prefix string, n uint64) string {
	const width = 13 // 36^13 > 2^64
	b := make([]byte, len(prefix)+width)
	copy(b, prefix)
	digits := b[len(prefix):]
	for i := width - 1; i >= 0; i-- {
		digits[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[n%36]
		n /= 36
	}
	return string(b)
}

// Write queues the row of an admitted request; its Cost is charged when
// the row is committed. It never blocks. After Close it records the row at
// once, so a request that outlives the writer still gets recorded.
func (w *Writer) Write(row *store.UsageLog) {
	if row.Key == "" {
		row.Key = rowKey(w.prefix, w.seq.Add(1))
	}
	if row.CreatedAt.IsZero() {
		row.CreatedAt = time.Now() // a replayed row keeps its time
	}
	w.mu.RLock()
	if !w.closed {
		seg := w.logInflight(row)
		w.queue <- queued{row, seg} // a slot was taken for it: the send never waits
		w.mu.RUnlock()
		return
	}
	w.mu.RUnlock()
	w.persist([]*store.UsageLog{row}, nil)
	w.retry()
}

// logInflight appends row to the inflight log, if there is one, and
// returns its segment. A failure is logged when it starts, not per row.
func (w *Writer) logInflight(row *store.UsageLog) *segment {
	if w.inflight == nil {
		return nil
	}
	seg, err := w.inflight.append(row)
	if err != nil {
		if !w.inflightFailing.Swap(true) {
			w.log.Warn("usage rows cannot be written to the inflight log: until they can, a row is safe from a kill only once committed", zap.Error(err))
		}
		return nil
	}
	if w.inflightFailing.Load() && w.inflightFailing.Swap(false) {
		w.log.Info("usage rows are written to the inflight log again")
	}
	return seg
}

// WriteUnadmitted records the row of a request refused before it took a
// slot (bad input, a limit), if a slot is free; otherwise the row is logged
// in full, since it charges nothing.
func (w *Writer) WriteUnadmitted(row *store.UsageLog) {
	if w.slots.Add(1) > int64(w.cfg.QueueSize) {
		w.slots.Add(-1)
		w.log.Warn("usage queue full: row of a refused request logged instead", zap.Any("row", row))
		return
	}
	w.Write(row)
}

// Degraded reports whether rows are being journaled or held, and why.
func (w *Writer) Degraded() (journaled, stuck bool, reason error) {
	if p := w.lastErr.Load(); p != nil {
		reason = *p
	}
	return w.journaled.Load(), w.stuck.Load(), reason
}

// Close stops accepting rows into the queue, records everything queued and
// returns when it is written (or, if nothing takes it, logged).
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
	w.pmu.Lock()
	defer w.pmu.Unlock()
	for _, r := range w.held {
		if w.inflight != nil {
			w.log.Error("usage row could be neither committed nor journaled: it stays in the inflight log for the next start", zap.Any("row", r))
		} else {
			w.log.Error("usage row could be neither committed nor journaled", zap.Any("row", r))
		}
	}
	if w.journal != nil {
		w.inflight.close()
		_ = w.journal.Close()
	}
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*store.UsageLog, 0, w.cfg.MaxBatch)
	segs := make([]*segment, 0, w.cfg.MaxBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	tick := time.NewTicker(w.cfg.RetryInterval)
	defer tick.Stop()
	for {
		var q queued
		select {
		case r, ok := <-w.queue:
			if !ok {
				w.retry()
				return
			}
			q = r
		case <-tick.C:
			w.retry()
			continue
		}
		// wait a moment for more rows, so that even a light load commits
		// many rows a transaction instead of one
		batch, segs = append(batch[:0], q.row), append(segs[:0], q.seg)
		linger.Reset(w.cfg.Linger)
	fill:
		for len(batch) < w.cfg.MaxBatch {
			select {
			case r, ok := <-w.queue:
				if !ok {
					break fill
				}
				batch, segs = append(batch, r.row), append(segs, r.seg)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		w.persist(batch, segs)
		clear(segs) // let removed segments go
	}
}

// persist records a batch: in the store, or while the store refuses, in
// the journal, or while both refuse, in memory.
func (w *Writer) persist(batch []*store.UsageLog, segs []*segment) {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if !w.degraded {
		err := w.commit(batch)
		if err == nil {
			// the segments first: a caller that sees the queue empty
			// finds every recorded row's segment released
			w.inflight.recorded(segs)
			w.slots.Add(-int64(len(batch)))
			return
		}
		w.fail(err)
		w.log.Error("the store refused usage rows: journaling them until it takes writes again",
			zap.Int("rows", len(batch)), zap.Error(err))
		w.degraded = true
		w.journaled.Store(true)
	}
	w.hold(batch, segs)
}

// hold journals rows, or keeps them in memory when the journal fails.
// Called with pmu held.
func (w *Writer) hold(batch []*store.UsageLog, segs []*segment) {
	rows := append(w.held, batch...)
	heldSegs := append(w.heldSegs, segs...)
	if w.journal != nil {
		err := w.journal.Append(rows)
		if err == nil {
			w.held, w.heldSegs = nil, nil
			w.stuck.Store(false)
			w.inflight.recorded(heldSegs)
			w.slots.Add(-int64(len(rows)))
			return
		}
		w.fail(err)
		if !w.stuck.Load() {
			w.log.Error("the usage journal refused rows too: refusing priced requests until the store or the journal takes writes",
				zap.Int("rows", len(rows)), zap.Error(err))
		}
	}
	w.held, w.heldSegs = rows, heldSegs
	w.stuck.Store(true)
}

// adoptInflight moves the rows an earlier run left in the inflight log
// (killed, or stopped with rows nothing took) into the journal, whose
// replay then commits them; rows it had committed are skipped by their
// keys. When the journal refuses them they go to the store directly, and
// when that refuses too they stay where they are for the next start,
// counted against their owners meanwhile. Called before run starts.
func (w *Writer) adoptInflight() {
	rows, paths, bad, err := leftInflight(w.cfg.Journal)
	if err != nil {
		w.log.Error("reading the inflight usage log left by an earlier run", zap.Error(err))
		return // its files stay, for a start that can read them
	}
	if len(paths) == 0 {
		return
	}
	if jerr := w.journal.Append(rows); jerr != nil {
		for start := 0; start < len(rows); start += w.cfg.MaxBatch {
			if cerr := w.commit(rows[start:min(start+w.cfg.MaxBatch, len(rows))]); cerr != nil {
				w.fail(cerr)
				w.log.Error("usage rows left in the inflight log by an earlier run can be neither journaled nor committed: they stay there for the next start",
					zap.Int("rows", len(rows)), zap.NamedError("journal", jerr), zap.NamedError("store", cerr))
				for _, r := range rows {
					w.ledger.Owe(r.UserID, r.TokenID, Charged(r))
				}
				return
			}
		}
	}
	for _, p := range paths {
		_ = os.Remove(p)
	}
	w.log.Info("usage rows left in the inflight log by an earlier run recovered (those it had committed are skipped)",
		zap.Int("rows", len(rows)), zap.Int("unreadable_lines", bad))
}

// retry tries again what failed: rows held in memory go to the journal,
// the journal is replayed into the store, and rows the journal still
// refuses go to the store directly once it takes writes.
func (w *Writer) retry() {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if len(w.held) > 0 && w.journal != nil {
		held, segs := w.held, w.heldSegs
		w.held, w.heldSegs = nil, nil
		w.hold(held, segs)
	}
	if w.degraded && !w.replay() {
		return
	}
	if len(w.held) > 0 {
		if err := w.commit(w.held); err != nil {
			w.fail(err)
			return
		}
		w.inflight.recorded(w.heldSegs)
		w.slots.Add(-int64(len(w.held)))
		w.held, w.heldSegs = nil, nil
		w.stuck.Store(false)
	}
}

// replay commits the journal to the store and empties it; false if the
// store still refuses. Called with pmu held (or before run starts).
func (w *Writer) replay() bool {
	if w.journal == nil {
		w.degraded = false
		w.journaled.Store(false)
		return true
	}
	rows, bad, err := w.journal.Rows()
	if err != nil {
		w.fail(err)
		return false
	}
	for start := 0; start < len(rows); start += w.cfg.MaxBatch {
		end := min(start+w.cfg.MaxBatch, len(rows))
		if err := w.commit(rows[start:end]); err != nil {
			w.fail(err)
			return false
		}
	}
	if err := w.journal.Clear(); err != nil {
		w.fail(err)
		return false
	}
	if len(rows) > 0 || bad > 0 {
		w.log.Info("usage journal replayed into the store", zap.Int("rows", len(rows)), zap.Int("unreadable_lines", bad))
	}
	w.degraded = false
	w.journaled.Store(false)
	w.lastErr.Store(nil)
	return true
}

// commit writes a batch to the store and tells the ledger what it charged:
// only the rows actually written, since a replayed row may have been.
func (w *Writer) commit(batch []*store.UsageLog) error {
	for _, r := range batch {
		r.ID = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CommitTimeout)
	defer cancel()
	// no lease is granted between the charge and the ledger hearing of it
	w.ledger.storeMu.Lock()
	defer w.ledger.storeMu.Unlock()
	start := time.Now()
	err := w.st.SettleBatch(ctx, batch)
	if f := w.onCommit.Load(); f != nil {
		(*f)(time.Since(start), len(batch), err)
	}
	if err != nil {
		w.writeErrors.Add(1)
		w.failingSince.CompareAndSwap(0, start.UnixNano())
		return err
	}
	w.failingSince.Store(0)
	users := make(map[int64]int64)
	tokens := make(map[int64]int64)
	for _, r := range batch {
		if r.ID == 0 {
			continue // stored before
		}
		users[r.UserID] = AddSat(users[r.UserID], Charged(r))
		if r.TokenID != 0 {
			tokens[r.TokenID] = AddSat(tokens[r.TokenID], Charged(r))
		}
	}
	w.ledger.Committed(users, tokens)
	if f := w.committed.Load(); f != nil {
		stored := make([]*store.UsageLog, 0, len(batch))
		for _, r := range batch {
			if r.ID != 0 {
				stored = append(stored, r)
			}
		}
		(*f)(stored)
	}
	return nil
}

func (w *Writer) fail(err error) { w.lastErr.Store(&err) }
