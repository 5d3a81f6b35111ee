package billing_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
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
	// group commit: far fewer transactions than rows (the journal's
	// replay commits in batches too)
	if b := fs.batches.Load(); b > n/10 {
		t.Fatalf("%d batches for %d rows", b, n)
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
	spend(t, w, ledger, u, 3, 5)
	waitFor(t, "billing to stop", func() bool { return errors.Is(w.Admit(true), billing.ErrUnavailable) })
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
	if c, _ := st.CountUsage(ctx); c != 6 {
		t.Fatalf("%d rows, want 6", c)
	}
	if got, _ := st.UserByID(ctx, u.ID); got.Quota != 1_000_000-15 {
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

// blockingStore commits until block is set, then never returns a commit,
// as a database stalled when the process is killed.
type blockingStore struct {
	store.Store
	block atomic.Bool
}

func (b *blockingStore) SettleBatch(ctx context.Context, logs []*store.UsageLog) error {
	if b.block.Load() {
		select {} // the kill ends it
	}
	return b.Store.SettleBatch(ctx, logs)
}

// TestWriterRowsSurviveAKill runs a writer in a child process, which
// commits 10 rows, then writes 40 more that its stalled database never
// takes, and is killed with SIGKILL. The next writer on the same journal
// finds all 50 in the inflight log and books each once.
func TestWriterRowsSurviveAKill(t *testing.T) {
	if dir := os.Getenv("BILLING_KILLED_WRITER"); dir != "" {
		killedWriter(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterRowsSurviveAKill$")
	cmd.Env = append(os.Environ(), "BILLING_KILLED_WRITER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "written\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("child said %q (%v)", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	journal := filepath.Join(dir, "journal")
	if left, _ := filepath.Glob(journal + ".inflight-*"); len(left) == 0 {
		t.Fatal("the killed writer left no inflight log")
	}
	st, err := sqlite.Open(filepath.Join(dir, "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if c, _ := st.CountUsage(ctx); c != 10 {
		t.Fatalf("%d rows committed before the kill, want 10", c)
	}
	w := billing.NewWriter(st, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: journal})
	w.Close()
	if c, _ := st.CountUsage(ctx); c != 50 {
		t.Fatalf("%d rows after the restart, want 50", c)
	}
	u, err := st.UserByName(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if u.Quota != 1_000_000-50*7 || u.RequestCount != 50 {
		t.Fatalf("user after the restart = %+v, want 50 requests costing 7 each", u)
	}
	if left, _ := filepath.Glob(journal + ".inflight-*"); len(left) != 0 {
		t.Fatalf("inflight segments left after a clean stop: %v", left)
	}
}

// killedWriter is the child of TestWriterRowsSurviveAKill.
func killedWriter(dir string) {
	st, err := sqlite.Open(filepath.Join(dir, "w.db"))
	if err != nil {
		panic(err)
	}
	u := &store.User{Username: "u", PasswordHash: "x", Quota: 1_000_000}
	if err := st.CreateUser(context.Background(), u); err != nil {
		panic(err)
	}
	bs := &blockingStore{Store: st}
	w := billing.NewWriter(bs, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: filepath.Join(dir, "journal")})
	write := func(n int) {
		for range n {
			if err := w.Admit(true); err != nil {
				panic(err)
			}
			w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 7, Status: 200})
		}
	}
	write(10)
	for w.QueueDepth() > 0 {
		time.Sleep(time.Millisecond)
	}
	bs.block.Store(true)
	write(40)
	fmt.Println("written")
	select {}
}

// An inflight segment is removed once every row in it is recorded and it
// is sealed: a run of rows many times a segment's size leaves at most the
// current segment on disk, and a clean stop none.
func TestWriterInflightLogStaysSmall(t *testing.T) {
	st, u := newUserStore(t, 1<<40)
	journal := filepath.Join(t.TempDir(), "journal")
	w := billing.NewWriter(st, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: journal})
	pad := strings.Repeat("x", 4000) // about 4 KB a row: 1 MiB in ~260 rows
	most := 0
	for i := range 2000 {
		if err := w.Admit(true); err != nil {
			t.Fatal(err)
		}
		w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 1, Status: 200, Error: pad})
		if i%100 == 0 {
			left, _ := filepath.Glob(journal + ".inflight-*")
			most = max(most, len(left))
		}
	}
	waitFor(t, "every row committed", func() bool { return w.QueueDepth() == 0 })
	if left, _ := filepath.Glob(journal + ".inflight-*"); len(left) != 1 {
		t.Fatalf("%d inflight segments with every row committed, want the current one: %v", len(left), left)
	}
	w.Close()
	if left, _ := filepath.Glob(journal + ".inflight-*"); len(left) != 0 {
		t.Fatalf("inflight segments left after a clean stop: %v", left)
	}
	if c, _ := st.CountUsage(context.Background()); c != 2000 {
		t.Fatalf("%d rows, want 2000", c)
	}
	t.Logf("at most %d segments on disk during the run", most)
}

// A second gateway starting on the same database leaves a live writer's
// inflight log alone (its rows are neither replayed nor removed).
func TestWriterLeavesALiveWritersInflightLog(t *testing.T) {
	st, u := newUserStore(t, 1_000_000)
	journal := filepath.Join(t.TempDir(), "journal")
	bs := &blockingStore{Store: st}
	bs.block.Store(true)
	w1 := billing.NewWriter(bs, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: journal})
	if err := w1.Admit(true); err != nil {
		t.Fatal(err)
	}
	w1.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 7, Status: 200})
	w2 := billing.NewWriter(st, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: journal})
	w2.Close()
	if c, _ := st.CountUsage(context.Background()); c != 0 {
		t.Fatalf("the second writer replayed %d rows of the live one", c)
	}
	if left, _ := filepath.Glob(journal + ".inflight-*"); len(left) != 1 {
		t.Fatalf("inflight segments: %v, want the live writer's", left)
	}
}

// BenchmarkWriterWrite is what recording a request's row costs the
// request on SQLite, with many requests finishing at once: write-ns is
// the time one Write takes (its append to the inflight log; the commit
// runs behind it), rows/commit the group commit's size, and ns/op the
// writer's throughput, commits included.
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
			w := billing.NewWriter(st, billing.NewLedger(), zap.NewNop(), billing.WriterConfig{Journal: filepath.Join(b.TempDir(), "journal")})
			var commits, rows, writeNs atomic.Int64
			w.OnCommit(func(_ time.Duration, n int, _ error) { commits.Add(1); rows.Add(int64(n)) })
			b.SetParallelism(perCPU)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					for w.Admit(true) != nil {
						time.Sleep(time.Millisecond) // the queue is full: commits are the bottleneck
					}
					start := time.Now()
					w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 3, Status: 200, PromptTokens: 10, CompletionTokens: 20})
					writeNs.Add(int64(time.Since(start)))
				}
			})
			w.Close()
			b.StopTimer()
			b.ReportMetric(float64(writeNs.Load())/float64(b.N), "write-ns")
			b.ReportMetric(float64(rows.Load())/float64(max(commits.Load(), 1)), "rows/commit")
		})
	}
}
