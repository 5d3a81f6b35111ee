package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// testDailyTotalsMatchRows checks the dashboard's daily totals against
// the rows they sum: for each group and from a day on, DailyTotals equals
// UsageTotals over the rows (written by two batches and a task's
// settlement, so sums add up across transactions), and it keeps every
// day when retention deletes the rows.
func testDailyTotalsMatchRows(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u1, u2 := mustUser(t, s, "u1", 1_000_000), mustUser(t, s, "u2", 1_000_000)
	k1, k2 := mustToken(t, s, u1.ID, "k1"), mustToken(t, s, u2.ID, "k2")
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var rows []*store.UsageLog
	for i := range 60 {
		l := &store.UsageLog{
			CreatedAt: today.AddDate(0, 0, -(i % 3)).Add(time.Duration(i) * time.Minute),
			UserID:    u1.ID, TokenID: k1.ID, Model: "m-a", Channel: "c-a", Status: 200,
			PromptTokens: int64(100 + i), CompletionTokens: int64(i), CachedTokens: int64(i % 7),
			Cost: int64(10 + i), LatencyMS: int64(300 + i), TTFBMS: int64(i), RequestID: fmt.Sprint("r", i),
		}
		if i%2 == 1 {
			l.UserID, l.TokenID, l.Model = u2.ID, k2.ID, "m-b"
		}
		switch i % 5 {
		case 1:
			l.Status, l.Cost, l.Channel = 429, 0, ""
		case 2:
			l.Channel = "c-b"
		case 3:
			l.CacheHit, l.CacheSaved = true, 40
		}
		rows = append(rows, l)
	}
	for _, batch := range [][]*store.UsageLog{rows[:25], rows[25:]} {
		if err := s.SettleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	since := today.AddDate(0, 0, -1) // yesterday and today: a day left out
	check := func(when string) {
		t.Helper()
		for _, by := range []store.UsageGroup{store.ByChannel, store.ByModel, store.ByUser, store.ByToken} {
			got, err := s.DailyTotals(ctx, by, since, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []store.UsageTotal
			for _, l := range rows {
				if l.CreatedAt.Before(since) {
					continue
				}
				want = addTotal(want, l, by)
			}
			if fmt.Sprint(got) != fmt.Sprint(sortTotals(want)) {
				t.Fatalf("%s, by %s:\n got %v\nwant %v", when, by, got, sortTotals(want))
			}
			if when == "written" {
				rowSums, err := s.UsageTotals(ctx, store.UsageFilter{Since: since}, by)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(rowSums) {
					t.Fatalf("by %s: the daily totals %v, the rows' sums %v", by, got, rowSums)
				}
			}
		}
	}
	check("written")
	if _, err := s.DailyTotals(ctx, "password", since, 0); err == nil {
		t.Fatal("an unknown group was accepted")
	}
	// the top key over the period: the costliest, then the busiest,
	// then the first by key (here u1's and u2's rows tie on both)
	for _, by := range []store.UsageGroup{store.ByUser, store.ByToken, store.ByModel, store.ByChannel} {
		top, err := s.DailyTotals(ctx, by, since, 1)
		if err != nil {
			t.Fatal(err)
		}
		sums := map[string]*store.UsageTotal{}
		for _, l := range rows {
			if !l.CreatedAt.Before(since) {
				k := store.GroupKey(l, by)
				if sums[k] == nil {
					sums[k] = &store.UsageTotal{Key: k}
				}
				sums[k].Cost += l.Cost
				sums[k].Requests++
			}
		}
		var first *store.UsageTotal
		for _, t := range sums {
			if first == nil || cmp.Or(cmp.Compare(t.Cost, first.Cost), cmp.Compare(t.Requests, first.Requests), strings.Compare(first.Key, t.Key)) > 0 {
				first = t
			}
		}
		var want []store.UsageTotal
		for _, l := range rows {
			if !l.CreatedAt.Before(since) && store.GroupKey(l, by) == first.Key {
				want = addTotal(want, l, by)
			}
		}
		if len(top) == 0 || fmt.Sprint(top) != fmt.Sprint(sortTotals(want)) {
			t.Fatalf("the top %s: %v, want %v", by, top, sortTotals(want))
		}
	}
	// retention deletes every row; the days stay
	for {
		n, err := s.DeleteUsageBefore(ctx, today.AddDate(0, 0, 2), 17)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n, _ := s.CountUsage(ctx); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	check("after retention")
}

// addTotal adds row l to the totals of its day and key in group by, as
// the store's daily totals count it.
func addTotal(ts []store.UsageTotal, l *store.UsageLog, by store.UsageGroup) []store.UsageTotal {
	day := l.CreatedAt.UTC().Truncate(24 * time.Hour)
	key := store.GroupKey(l, by)
	i := 0
	for i < len(ts) && !(ts[i].Day.Equal(day) && ts[i].Key == key) {
		i++
	}
	if i == len(ts) {
		ts = append(ts, store.UsageTotal{Day: day, Key: key})
	}
	t := &ts[i]
	t.Requests++
	if l.Status < 200 || l.Status >= 300 {
		t.Errors++
	}
	t.Cost += l.Cost
	t.Tokens += l.PromptTokens + l.CompletionTokens
	t.PromptTokens += l.PromptTokens
	t.CachedTokens += l.CachedTokens
	t.LatencyMS += l.LatencyMS
	t.TTFBMS += l.TTFBMS
	if l.CacheHit {
		t.CacheHits++
	}
	t.CacheSaved += l.CacheSaved
	return ts
}

// sortTotals orders totals as the store returns them: by day, then key.
func sortTotals(ts []store.UsageTotal) []store.UsageTotal {
	slices.SortFunc(ts, func(a, b store.UsageTotal) int {
		return cmp.Or(a.Day.Compare(b.Day), strings.Compare(a.Key, b.Key))
	})
	return ts
}
