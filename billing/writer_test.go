package billing_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
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
	w := billing.NewWriter(fs, ledger, zap.NewNop())
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
				w.Write(&store.UsageLog{UserID: u.ID, Model: "m", Cost: 3, Status: 200})
			}
		}()
	}
	wg.Wait()
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
	// group commit: far fewer transactions than rows
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
