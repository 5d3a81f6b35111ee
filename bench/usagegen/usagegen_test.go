package usagegen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// TestFillWritesRowsAndRollups fills a small SQLite store and checks what
// the pages read: every row, in time order, with the gateway's id formats,
// about 2 % failed, and the daily totals equal to the rows' sums.
func TestFillWritesRowsAndRollups(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	end := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	g := New(Config{Rows: 5000, Days: 3, Users: 20, Models: 6, Channels: 4, Batch: 700, End: end})
	if err := g.Fill(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountUsage(ctx); err != nil || n != 5000 {
		t.Fatalf("CountUsage = %d, %v; want 5000", n, err)
	}
	var rows []*store.UsageLog
	for after := int64(0); ; {
		page, err := st.UsageSince(ctx, time.Time{}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		rows = append(rows, page...)
		after = page[len(page)-1].ID
	}
	var failed, cost, requests int64
	users := map[int64]bool{}
	for i, l := range rows {
		if i > 0 && (l.CreatedAt.Before(rows[i-1].CreatedAt) || l.RequestID <= rows[i-1].RequestID && l.CreatedAt.After(rows[i-1].CreatedAt)) {
			t.Fatalf("row %d is out of time order: %s after %s", i, l.CreatedAt, rows[i-1].CreatedAt)
		}
		if len(l.RequestID) != 32 || len(l.Key) != 26 { // the writer's: 12 hex, "-", 13 base 36
			t.Fatalf("row %d: request id %q, key %q", i, l.RequestID, l.Key)
		}
		if l.CreatedAt.Before(end.AddDate(0, 0, -3)) || l.CreatedAt.After(end) {
			t.Fatalf("row %d at %s: outside the 3 days", i, l.CreatedAt)
		}
		if l.Status < 200 || l.Status >= 300 {
			failed++
			if l.Error == "" || l.Cost != 0 {
				t.Fatalf("failed row %d: %+v", i, l)
			}
		}
		cost += l.Cost
		requests++
		users[l.UserID] = true
	}
	if failed < 50 || failed > 200 {
		t.Errorf("%d of 5000 rows failed; want about 2 %%", failed)
	}
	if len(users) < 10 {
		t.Errorf("rows of %d users; want most of 20", len(users))
	}
	days, err := st.DailyUsageByModel(ctx, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var dayCost, dayRequests int64
	for _, d := range days {
		dayCost += d.Cost
		dayRequests += d.Requests
		if !strings.HasPrefix(d.Model, "gpt-") && !strings.HasPrefix(d.Model, "claude-") &&
			!strings.HasPrefix(d.Model, "gemini-") && !strings.HasPrefix(d.Model, "text-") {
			t.Errorf("model %q", d.Model)
		}
	}
	if dayCost != cost || dayRequests != requests {
		t.Errorf("daily totals: cost %d, requests %d; the rows: %d, %d", dayCost, dayRequests, cost, requests)
	}

	// the same seed makes the same rows
	again := New(Config{Rows: 5000, Days: 3, Users: 20, Models: 6, Channels: 4, Batch: 700, End: end})
	again.UserIDs, again.Keys = g.UserIDs, g.Keys
	first := again.Next()[0]
	if first.RequestID != rows[0].RequestID || first.Cost != rows[0].Cost || first.Model != rows[0].Model {
		t.Errorf("seed 34 made %+v, then %+v", rows[0], first)
	}

	// Measure runs every read on it
	res, err := Measure(ctx, st, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 20 {
		t.Errorf("%d reads measured", len(res))
	}
	for _, r := range res {
		if r.Runs != 2 {
			t.Errorf("%s: %d runs", r.Name, r.Runs)
		}
	}
}

// FastFill needs a store with a bulk load (LoadUsageDay; each store's
// TestLoadUsageDayEqualsSettleBatch checks what it writes), and says so
// on one without rather than fill it another way.
func TestFastFillNeedsABulkLoad(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := New(Config{Rows: 10, Days: 1, Users: 2, Models: 2, Channels: 2})
	// the store's methods, none beyond store.Store's
	err = g.FastFill(context.Background(), struct{ store.Store }{st}, nil)
	if err == nil || !strings.Contains(err.Error(), "no bulk load") {
		t.Fatalf("FastFill on a store without LoadUsageDay: %v; want the store has no bulk load", err)
	}
	if n, err := st.CountUsage(context.Background()); err != nil || n != 0 {
		t.Fatalf("CountUsage = %d, %v; want 0", n, err)
	}
}
