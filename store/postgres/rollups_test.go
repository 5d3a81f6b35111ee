package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// A batch with many users' rows writes its daily rollups in one statement
// a table (queueRollups, at rollupArrayKeys keys and more): usage_daily,
// usage_daily_models and the totals equal the rows' sums, and a second
// batch on the same keys adds to them.
func TestRollupsManyKeys(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	const users = 3 * rollupArrayKeys
	type sum struct{ cost, requests, prompt int64 }
	wantDaily := map[[2]int64]sum{}           // user, day
	wantModels := map[string]sum{}            // day user model
	wantUsers := map[int64]store.UsageTotal{} // user id: today's and yesterday's
	for batch := range 2 {
		var logs []*store.UsageLog
		for i := range 4 * users {
			u := int64(i%users + 1)
			day := today.AddDate(0, 0, -(i % 2))
			l := &store.UsageLog{CreatedAt: day.Add(time.Duration(batch*1000+i) * time.Second), UserID: u,
				Model: fmt.Sprint("m", i%3), Cost: int64(i + 1), PromptTokens: int64(10 * i), Status: 200}
			logs = append(logs, l)
			d := day.UnixMilli() / store.MsPerDay
			s := wantDaily[[2]int64{u, d}]
			wantDaily[[2]int64{u, d}] = sum{s.cost + l.Cost, s.requests + 1, 0}
			mk := fmt.Sprint(d, " ", u, " ", l.Model)
			m := wantModels[mk]
			wantModels[mk] = sum{m.cost + l.Cost, m.requests + 1, m.prompt + l.PromptTokens}
			ut := wantUsers[u]
			ut.Cost, ut.Requests = ut.Cost+l.Cost, ut.Requests+1
			wantUsers[u] = ut
		}
		if err := st.SettleBatch(ctx, logs); err != nil {
			t.Fatal(err)
		}
	}
	for u := int64(1); u <= users; u++ {
		days, err := st.DailySpend(ctx, u, today.AddDate(0, 0, -1))
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 2 {
			t.Fatalf("user %d: %d days", u, len(days))
		}
		for _, d := range days {
			w := wantDaily[[2]int64{u, d.Day.UnixMilli() / store.MsPerDay}]
			if d.Cost != w.cost || d.Requests != w.requests {
				t.Errorf("user %d, %s: cost %d, %d requests; want %d, %d", u, d.Day, d.Cost, d.Requests, w.cost, w.requests)
			}
		}
	}
	models, err := st.DailyUsageByModel(ctx, 0, today.AddDate(0, 0, -1))
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != len(wantModels) {
		t.Fatalf("%d model days, want %d", len(models), len(wantModels))
	}
	for _, m := range models {
		w := wantModels[fmt.Sprint(m.Day.UnixMilli()/store.MsPerDay, " ", m.UserID, " ", m.Model)]
		if m.Cost != w.cost || m.Requests != w.requests || m.PromptTokens != w.prompt {
			t.Errorf("%s user %d %s: %+v, want %+v", m.Day, m.UserID, m.Model, m, w)
		}
	}
	totals, err := st.DailyTotals(ctx, store.ByUser, today.AddDate(0, 0, -1), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.UsageTotal{}
	for _, tt := range totals {
		g := got[tt.Key]
		g.Cost, g.Requests = g.Cost+tt.Cost, g.Requests+tt.Requests
		got[tt.Key] = g
	}
	for u, w := range wantUsers {
		if g := got[fmt.Sprint(u)]; g.Cost != w.Cost || g.Requests != w.Requests {
			t.Errorf("user %d's totals: cost %d, %d requests; want %d, %d", u, g.Cost, g.Requests, w.Cost, w.Requests)
		}
	}
}
