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

// TestRetentionDeletesOldRowsInBatches: rows past the window go, a batch
// at a time, each batch counted; newer rows and the daily totals stay.
func TestRetentionDeletesOldRowsInBatches(t *testing.T) {
	st, u := newUserStore(t, 0)
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	var rows []*store.UsageLog
	for i := range 25 {
		created := time.Now()
		if i < 23 {
			created = old
		}
		rows = append(rows, &store.UsageLog{Key: fmt.Sprint("row-", i), CreatedAt: created, UserID: u.ID, Model: "m", Cost: 1, Status: 200})
	}
	if err := st.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		batches []int64
	)
	r := &billing.Retention{Store: st, Keep: 24 * time.Hour, BatchSize: 10, Pause: time.Millisecond,
		Deleted: func(n int64) { mu.Lock(); batches = append(batches, n); mu.Unlock() }}
	r.Start()
	waitFor(t, "the old rows to go", func() bool {
		n, err := st.CountUsage(ctx)
		return err == nil && n == 2
	})
	r.Stop()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(batches) != "[10 10 3]" {
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
