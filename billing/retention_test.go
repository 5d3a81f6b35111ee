package billing_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestRetentionDeletesOldRowsInBatches: on a store that does not keep
// usage by day, rows past the window go a batch at a time, each batch
// counted; newer rows and the daily totals stay.
func TestRetentionDeletesOldRowsInBatches(t *testing.T) {
	st, u := newUserStore(t, 0)
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	seedExpired(t, st, u.ID, old)
	if batches := sweepCounts(t, rowsOnly{st}); fmt.Sprint(batches) != "[10 10 3]" {
		t.Errorf("batches %v, want [10 10 3]", batches)
	}
	days, err := st.DailyUsageByModel(ctx, u.ID, old.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var requests int64
	for _, d := range days {
		requests += d.Requests
	}
	if requests != 25 {
		t.Errorf("daily totals count %d requests after retention, want all 25", requests)
	}
}

// rowsOnly is a store with none of its own methods beyond store.Store's:
// it hides the SQLite store's day tables (store.UsageDays).
type rowsOnly struct{ store.Store }

// daysStore keeps usage by day (store.UsageDays), as PostgreSQL does.
type daysStore struct {
	store.Store
	mu      sync.Mutex
	cutoffs []time.Time
}

func (d *daysStore) DropUsageDays(_ context.Context, cutoff time.Time) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cutoffs = append(d.cutoffs, cutoff)
	return 5000, nil
}

// TestRetentionDropsWholeDaysFirst: on a store that keeps usage by day,
// a sweep drops the expired days at once, counted like a batch, and
// deletes what is left in batches.
func TestRetentionDropsWholeDaysFirst(t *testing.T) {
	st, u := newUserStore(t, 0)
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	if err := st.SettleBatch(ctx, []*store.UsageLog{{Key: "old", CreatedAt: old, UserID: u.ID, Cost: 1, Status: 200}}); err != nil {
		t.Fatal(err)
	}
	ds := &daysStore{Store: st}
	var (
		mu      sync.Mutex
		batches []int64
	)
	began := time.Now()
	r := &billing.Retention{Store: ds, Keep: 24 * time.Hour, BatchSize: 10, Pause: time.Millisecond,
		Deleted: func(n int64) { mu.Lock(); batches = append(batches, n); mu.Unlock() }}
	r.Start()
	waitFor(t, "the sweep", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(batches) == 2
	})
	r.Stop()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(batches) != "[5000 1]" {
		t.Errorf("batches %v, want the dropped days' 5000 rows, then the 1 row left", batches)
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if len(ds.cutoffs) != 1 || ds.cutoffs[0].Before(began.Add(-24*time.Hour)) || ds.cutoffs[0].After(time.Now().Add(-24*time.Hour)) {
		t.Errorf("days dropped before %v, want one call with now - 24h", ds.cutoffs)
	}
}

// TestRetentionDropsSQLiteDays: on SQLite, whose usage rows are kept in a
// table per day, the expired day's rows go at once (one count of 23), the
// day's table dropped rather than its rows deleted.
func TestRetentionDropsSQLiteDays(t *testing.T) {
	st, u := newUserStore(t, 0)
	seedExpired(t, st, u.ID, time.Now().Add(-72*time.Hour))
	if batches := sweepCounts(t, st); fmt.Sprint(batches) != "[23]" {
		t.Errorf("batches %v, want the expired day's 23 rows at once", batches)
	}
}

// seedExpired writes 25 usage rows of user, 23 of them at old.
func seedExpired(t *testing.T, st store.Store, user int64, old time.Time) {
	t.Helper()
	var rows []*store.UsageLog
	for i := range 25 {
		created := time.Now()
		if i < 23 {
			created = old
		}
		rows = append(rows, &store.UsageLog{Key: fmt.Sprint("row-", i), CreatedAt: created, UserID: user, Model: "m", Cost: 1, Status: 200})
	}
	if err := st.SettleBatch(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// sweepCounts runs retention with a day's window over st until two rows
// are left, and returns the counts it reported.
func sweepCounts(t *testing.T, st store.Store) []int64 {
	t.Helper()
	var (
		mu      sync.Mutex
		batches []int64
	)
	r := &billing.Retention{Store: st, Keep: 24 * time.Hour, BatchSize: 10, Pause: time.Millisecond,
		Deleted: func(n int64) { mu.Lock(); batches = append(batches, n); mu.Unlock() }}
	r.Start()
	waitFor(t, "the old rows to go", func() bool {
		n, err := st.CountUsage(context.Background())
		return err == nil && n == 2
	})
	r.Stop()
	mu.Lock()
	defer mu.Unlock()
	return batches
}
