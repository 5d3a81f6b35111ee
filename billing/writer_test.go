package billing_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// flakyStore fails its first commits and counts batches.
type flakyStore struct {
	store.Store
	failures atomic.Int32
	batches  atomic.Int32
}

func (f *flakyStore) SettleBatch(ctx context.Context, logs []*store.UsageLog) error {
	if f.failures.Add(-1) >= 0 {
		return errors.New("disk on fire")
	}
	f.batches.Add(1)
	return f.Store.SettleBatch(ctx, logs)
}

func TestWriterNeverDropsARow(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	u := &store.User{Username: "u", PasswordHash: "x", Quota: 1_000_000}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{Store: st}
	fs.failures.Store(2)
	ledger := billing.NewLedger()
	tok := &store.Token{ID: 0}
	w := billing.NewWriter(fs, ledger, zap.NewNop(), billing.WriterConfig{
		Journal: filepath.Join(t.TempDir(), "journal"), RetryInterval: 10 * time.Millisecond})
	var attempts, failedAttempts atomic.Int32
	w.OnCommit(func(_ time.Duration, _ int, err error) {
		attempts.Add(1)
		if err != nil {
			failedAttempts.Add(1)
		}
	})

	const n = 2000
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/8; i++ {
				h, ok := ledger.Admit(u, tok, 3)
				if !ok {
					t.Error("admission refused")
					return
				}
				ledger.Settle(h, 3)
				if err := w.Admit(true); err != nil {
					t.Error(err)
					return
				}
				w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 3, Status: 200})
			}
		}()
	}
	wg.Wait()
	// the two refused batches went to the journal (wait for them: until
	// then the journal is not in use, and rows closed into it then are only
	// replayed at the next start); it is replayed once the store takes
	// writes again
	waitFor(t, "the store's two refusals", func() bool { return failedAttempts.Load() >= 2 })
	waitFor(t, "the journal's replay", func() bool { j, _, _ := w.Degraded(); return !j })
	w.Close()

	if c, _ := st.CountUsage(ctx); c != n {
		t.Fatalf("%d rows written, want %d", c, n)
	}
	got, _ := st.UserByID(ctx, u.ID)
	if got.Quota != 1_000_000-3*n || got.UsedQuota != 3*n || got.RequestCount != n {
		t.Fatalf("user after settlement: %+v", got)
	}
	if avail, _ := ledger.Available(u.ID); avail != 1_000_000-3*n {
		t.Fatalf("ledger says %d available, want %d", avail, 1_000_000-3*n)
	}
	// the two failures were counted and are over
	if _, failing := w.FailingSince(); failing || w.WriteErrors() != 2 || failedAttempts.Load() != 2 ||
		attempts.Load() != fs.batches.Load()+2 || w.QueueDepth() != 0 {
		t.Fatalf("write errors %d, failing %v, attempts seen %d of which failed %d, batches %d, queue %d",
			w.WriteErrors(), failing, attempts.Load(), failedAttempts.Load(), fs.batches.Load(), w.QueueDepth())
	}
	// after Close a row is still written, at once
	w.Write(&store.UsageLog{UserID: u.ID, Model: "late", Status: 200})
	if c, _ := st.CountUsage(ctx); c != n+1 {
		t.Fatalf("a row written after Close was lost: %d rows", c)
	}
}

// switchStore refuses writes while down is set.
type switchStore struct {
	store.Store
	down    atomic.Bool
	batches atomic.Int32
}

func (s *switchStore) SettleBatch(ctx context.Context, logs []*store.UsageLog) error {
	if s.down.Load() {
		return errors.New("database is locked")
	}
	s.batches.Add(1)
	return s.Store.SettleBatch(ctx, logs)
}

func newUserStore(t *testing.T, quota int64) (*sqlite.Store, *store.User) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u := &store.User{Username: "u", PasswordHash: "x", Quota: quota}
	if err := st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return st.(*sqlite.Store), u
}

// spend admits, settles and writes n rows of cost each, as the relay does.
func spend(t *testing.T, w *billing.Writer, l *billing.Ledger, u *store.User, n int, cost int64) {
	t.Helper()
	tok := &store.Token{}
	for i := 0; i < n; i++ {
		if err := w.Admit(cost > 0); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		h, ok := l.Admit(u, tok, cost)
		if !ok {
			t.Fatalf("row %d: ledger refused", i)
		}
		l.Settle(h, cost)
		w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: cost, Status: 200})
	}
}

// waitFor polls cond; the writer works in the background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestWriterJournalsWhileTheStoreRefuses(t *testing.T) {
	st, u := newUserStore(t, 1_000_000)
	ss := &switchStore{Store: st}
	ledger := billing.NewLedger()
	journal := filepath.Join(t.TempDir(), "journal")
	w := billing.NewWriter(ss, ledger, zap.NewNop(), billing.WriterConfig{Journal: journal, RetryInterval: 5 * time.Millisecond})
	ctx := context.Background()

	spend(t, w, ledger, u, 10, 7)
	waitFor(t, "the first rows", func() bool { c, _ := st.CountUsage(ctx); return c == 10 })
	ss.down.Store(true)
	spend(t, w, ledger, u, 20, 7)
	waitFor(t, "rows in the journal", func() bool {
		rows, _, _ := billing.OpenJournal(journal).Rows()
		return len(rows) == 20
	})
	if j, _, _ := w.Degraded(); !j {
		t.Fatal("the writer does not say it is journaling")
	}
	// journaled costs still count against the balance
	if avail, _ := ledger.Available(u.ID); avail != 1_000_000-30*7 {
		t.Fatalf("available while journaling = %d", avail)
	}
	ss.down.Store(false)
	spend(t, w, ledger, u, 5, 7)
	w.Close()
	if c, _ := st.CountUsage(ctx); c != 35 {
		t.Fatalf("%d rows, want 35", c)
	}
	got, _ := st.UserByID(ctx, u.ID)
	if got.Quota != 1_000_000-35*7 || got.UsedQuota != 35*7 || got.RequestCount != 35 {
		t.Fatalf("user = %+v", got)
	}
	if avail, _ := ledger.Available(u.ID); avail != 1_000_000-35*7 {
		t.Fatalf("ledger available = %d", avail)
	}
	if rows, _, _ := billing.OpenJournal(journal).Rows(); len(rows) != 0 {
		t.Fatalf("journal not emptied: %d rows", len(rows))
	}
}

// A journal left by a run that died after committing part of it (or all
// of it, before emptying it) is replayed at start: every row once.
func TestWriterReplaysAJournalOnceAtStart(t *testing.T) {
	st, u := newUserStore(t, 1_000_000)
	ctx := context.Background()
	journal := filepath.Join(t.TempDir(), "journal")
	var rows []*store.UsageLog
	for i := 0; i < 6; i++ {
		rows = append(rows, &store.UsageLog{Key: fmt.Sprintf("run1-%d", i), UserID: u.ID, Cost: 11, Status: 200})
	}
	// rows 0-2 reached the store before the crash
	if err := st.SettleBatch(ctx, rows[:3]); err != nil {
		t.Fatal(err)
	}
	j := billing.OpenJournal(journal)
	if err := j.Append(rows); err != nil {
		t.Fatal(err)
	}
	j.Close()
	// a torn last line, as a crash mid-write leaves it
	f, _ := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"key":"run1-9","user_id":1,"co`)
	f.Close()

	w := billing.NewWriter(st, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: journal})
	w.Close()
	if c, _ := st.CountUsage(ctx); c != 6 {
		t.Fatalf("%d rows, want 6", c)
	}
	got, _ := st.UserByID(ctx, u.ID)
	if got.Quota != 1_000_000-66 || got.RequestCount != 6 {
		t.Fatalf("user = %+v", got)
	}
}

// With the journal refusing too (its disk full: /dev/full), priced
// requests are refused, free ones go on, and nothing admitted is lost.
func TestWriterRefusesPricedWorkWhenNothingTakesRows(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	st, u := newUserStore(t, 1_000_000)
	ss := &switchStore{Store: st}
	ledger := billing.NewLedger()
	journal := filepath.Join(t.TempDir(), "journal")
	if err := os.Symlink("/dev/full", journal); err != nil {
		t.Fatal(err)
	}
	w := billing.NewWriter(ss, ledger, zap.NewNop(), billing.WriterConfig{Journal: journal, RetryInterval: 5 * time.Millisecond})
	ss.down.Store(true)
	// Write returns once its row is held, so the next priced request
	// already finds billing stopped
	spend(t, w, ledger, u, 1, 5)
	if err := w.Admit(true); !errors.Is(err, billing.ErrUnavailable) {
		t.Fatalf("priced admission with nothing taking rows: %v, want billing unavailable", err)
	}
	spend(t, w, ledger, u, 2, 0) // free models keep working
	ss.down.Store(false)
	waitFor(t, "billing to resume", func() bool {
		err := w.Admit(true)
		if err == nil {
			w.Write(&store.UsageLog{UserID: u.ID, Status: 200})
		}
		return err == nil
	})
	w.Close()
	ctx := context.Background()
	if c, _ := st.CountUsage(ctx); c != 4 {
		t.Fatalf("%d rows, want 4", c)
	}
	if got, _ := st.UserByID(ctx, u.ID); got.Quota != 1_000_000-5 {
		t.Fatalf("user = %+v", got)
	}
}

func TestWriterQueueIsBounded(t *testing.T) {
	st, u := newUserStore(t, 0)
	ss := &switchStore{Store: st}
	ss.down.Store(true)
	// no journal: rows wait in memory, holding their slots
	w := billing.NewWriter(ss, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{QueueSize: 3, RetryInterval: 5 * time.Millisecond})
	for i := 0; i < 3; i++ {
		if err := w.Admit(false); err != nil {
			t.Fatal(err)
		}
		w.Write(&store.UsageLog{UserID: u.ID, Status: 200})
	}
	if err := w.Admit(false); !errors.Is(err, billing.ErrQueueFull) {
		t.Fatalf("fourth admission: %v, want queue full", err)
	}
	ss.down.Store(false)
	waitFor(t, "the queue to drain", func() bool {
		err := w.Admit(false)
		if err == nil {
			w.Write(&store.UsageLog{UserID: u.ID, Status: 200})
		}
		return err == nil
	})
	w.Close()
	if c, _ := st.CountUsage(context.Background()); c != 4 {
		t.Fatalf("%d rows, want 4", c)
	}
}

// gateStore holds its first commit until gate is closed and keeps the size
// of every batch.
type gateStore struct {
	store.Store
	gate  chan struct{}
	mu    sync.Mutex
	sizes []int
}

func (g *gateStore) SettleBatch(_ context.Context, logs []*store.UsageLog) error {
	g.mu.Lock()
	first := len(g.sizes) == 0
	g.sizes = append(g.sizes, len(logs))
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	for i, r := range logs {
		r.ID = int64(i + 1)
	}
	return nil
}

// Write returns only once its row is committed, and the rows of requests
// that finish while a commit is under way share the next commit.
func TestWriterWaitsForTheCommitAndGroupsRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gs := &gateStore{gate: make(chan struct{})}
		w := billing.NewWriter(gs, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{})
		var wg sync.WaitGroup
		var returned atomic.Int32
		write := func() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Admit(false); err != nil {
					t.Error(err)
					return
				}
				w.Write(&store.UsageLog{UserID: 1, Status: 200})
				returned.Add(1)
			}()
		}
		write()
		synctest.Wait() // its commit is at the gate
		const n = 50
		for range n {
			write()
		}
		synctest.Wait() // every row is written and waits
		if r := returned.Load(); r != 0 {
			t.Fatalf("%d writes returned before their rows were committed", r)
		}
		close(gs.gate)
		wg.Wait()
		w.Close()
		if len(gs.sizes) != 2 || gs.sizes[0] != 1 || gs.sizes[1] != n {
			t.Fatalf("batches of %v rows, want [1 %d]", gs.sizes, n)
		}
	})
}

// BenchmarkWriterWrite is the cost of recording a request's row on SQLite
// with many requests finishing at once: ns/op is the writer's throughput
// (one row per op, the final commit included), latency-ns the time one
// Write waits for its row's commit, rows/commit the group commit's size.
func BenchmarkWriterWrite(b *testing.B) {
	for _, perCPU := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%dxGOMAXPROCS", perCPU), func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "w.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			u := &store.User{Username: "u", PasswordHash: "x", Quota: 1 << 60}
			if err := st.CreateUser(context.Background(), u); err != nil {
				b.Fatal(err)
			}
			ledger := billing.NewLedger()
			w := billing.NewWriter(st, ledger, zap.NewNop(), billing.WriterConfig{Journal: filepath.Join(b.TempDir(), "journal")})
			var commits atomic.Int64
			w.OnCommit(func(time.Duration, int, error) { commits.Add(1) })
			var waited atomic.Int64
			b.SetParallelism(perCPU)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := w.Admit(true); err != nil {
						b.Error(err)
						return
					}
					start := time.Now()
					w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 3, Status: 200, PromptTokens: 10, CompletionTokens: 20})
					waited.Add(int64(time.Since(start)))
				}
			})
			w.Close()
			b.StopTimer()
			b.ReportMetric(float64(waited.Load())/float64(b.N), "latency-ns")
			b.ReportMetric(float64(b.N)/float64(max(commits.Load(), 1)), "rows/commit")
		})
	}
}
