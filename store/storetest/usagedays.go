package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Usage across days: both stores keep a day's rows apart (PostgreSQL's
// partitions, SQLite's day tables), and every read must still see one
// log. Rows of five days (one far in the past, one far ahead, several in
// the same millisecond) list newest first page after page exactly as one
// sorted table would, by filter; ids are unique; the export reads each
// row once in id order; a replayed keyed row is written once; retention
// (whole days dropped, then batches) removes what is before its cutoff and
// nothing after, the daily totals none of it; a late row of a dropped day
// lands again.
func testUsageAcrossDays(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a, b := mustUser(t, s, "days-a", 1_000_000), mustUser(t, s, "days-b", 1_000_000)
	base := time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)
	at := []time.Time{
		time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC), // far in the past
		base.Add(-26 * time.Hour), base.Add(-25 * time.Hour),
		base, base, base, base.Add(time.Millisecond), // the same millisecond, and the next
		base.Add(23*time.Hour + 59*time.Minute), base.Add(24 * time.Hour), base.Add(30 * time.Hour),
		time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), // far ahead
	}
	var logs []*store.UsageLog
	for i, c := range at {
		u := a
		if i%3 == 1 {
			u = b
		}
		logs = append(logs, &store.UsageLog{UserID: u.ID, Model: "m", Cost: int64(i + 1), Status: 200, CreatedAt: c,
			Key: fmt.Sprintf("days-%d", i), RequestID: fmt.Sprintf("req-%d", i)})
	}
	// two batches, the second with the first's rows replayed
	if err := s.SettleBatch(ctx, logs[:6]); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListUsage(ctx, store.UsageFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(at) {
		t.Fatalf("%d rows listed, want %d (a replayed row written twice, or a day lost)", len(all), len(at))
	}
	seen := map[int64]bool{}
	for i, l := range all {
		if seen[l.ID] {
			t.Fatalf("id %d twice", l.ID)
		}
		seen[l.ID] = true
		if i > 0 && (l.CreatedAt.After(all[i-1].CreatedAt) || l.CreatedAt.Equal(all[i-1].CreatedAt) && l.ID > all[i-1].ID) {
			t.Fatalf("not newest first at %d: %v/%d after %v/%d", i, l.CreatedAt, l.ID, all[i-1].CreatedAt, all[i-1].ID)
		}
	}
	if !all[0].CreatedAt.Equal(at[len(at)-1]) || !all[len(all)-1].CreatedAt.Equal(at[0]) {
		t.Fatalf("newest %v, oldest %v", all[0].CreatedAt, all[len(all)-1].CreatedAt)
	}
	if u, _ := s.UserByID(ctx, a.ID); u.UsedQuota+mustUserUsed(t, s, b.ID) != int64(len(at)*(len(at)+1)/2) {
		t.Fatalf("charged %d, want each row once", u.UsedQuota+mustUserUsed(t, s, b.ID))
	}

	// pages of 2 by cursor, whole and by user, equal the whole list
	for _, f := range []store.UsageFilter{{}, {UserID: a.ID}, {UserID: b.ID}, {Since: base.Add(-25 * time.Hour), Until: base.Add(24 * time.Hour)}} {
		want, err := s.ListUsage(ctx, store.UsageFilter{UserID: f.UserID, Since: f.Since, Until: f.Until, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []*store.UsageLog
		f.Limit = 2
		for {
			page, err := s.ListUsage(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
			if len(page) < 2 {
				break
			}
			last := page[len(page)-1]
			f.After = &store.UsageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		if !slices.EqualFunc(got, want, func(x, y *store.UsageLog) bool { return x.ID == y.ID }) {
			t.Fatalf("pages of %+v: %d rows, want %d", f, len(got), len(want))
		}
	}
	if one, err := s.ListUsage(ctx, store.UsageFilter{RequestID: "req-0"}); err != nil || len(one) != 1 || !one[0].CreatedAt.Equal(at[0]) {
		t.Fatalf("the oldest row by its request id: %+v, %v", one, err)
	}

	// the export: every row once, ids increasing
	var exported []*store.UsageLog
	for after := int64(0); ; {
		page, err := s.UsageSince(ctx, time.Time{}, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, l := range page {
			if l.ID <= after {
				t.Fatalf("export: id %d after %d", l.ID, after)
			}
			after = l.ID
		}
		exported = append(exported, page...)
	}
	if len(exported) != len(at) {
		t.Fatalf("exported %d rows, want %d", len(exported), len(at))
	}
	if n, err := s.CountUsage(ctx); err != nil || n != int64(len(at)) {
		t.Fatalf("count %d, %v", n, err)
	}

	// retention at base+12h: whole days before base go at once, then the
	// rows of base's day before the cutoff in batches
	cutoff := base.Add(12 * time.Hour)
	days, ok := s.(store.UsageDays)
	if !ok {
		t.Fatal("the store does not keep usage by day (store.UsageDays)")
	}
	// (PostgreSQL makes partitions for the days around now, and keeps rows
	// of other days in its default partition, which the batches delete)
	dropped, err := days.DropUsageDays(ctx, cutoff)
	if err != nil || dropped != 0 && dropped != 3 {
		t.Fatalf("dropped %d rows, %v; want the 3 of the days before %v, or none kept apart", dropped, err, base)
	}
	var deleted int64
	for {
		n, err := s.DeleteUsageBefore(ctx, cutoff, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		deleted += n
	}
	if dropped+deleted != 7 {
		t.Fatalf("dropped %d and deleted %d rows, want the 7 before the cutoff", dropped, deleted)
	}
	left, err := s.ListUsage(ctx, store.UsageFilter{Limit: 100})
	if err != nil || len(left) != len(at)-7 || !left[len(left)-1].CreatedAt.Equal(at[7]) {
		t.Fatalf("left %d rows, %v", len(left), err)
	}
	// a late row of a dropped day lands again, and is found
	late := &store.UsageLog{UserID: a.ID, Model: "m", Cost: 1, Status: 200, CreatedAt: base.Add(-25 * time.Hour), Key: "days-late"}
	if err := s.SettleBatch(ctx, []*store.UsageLog{late}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListUsage(ctx, store.UsageFilter{Until: base, Limit: 10}); err != nil || len(got) != 1 || got[0].ID != late.ID {
		t.Fatalf("the late row: %+v, %v", got, err)
	}
	// the days' sums outlive their rows
	spend, err := s.DailySpend(ctx, a.ID, base.Add(-48*time.Hour))
	if err != nil || len(spend) < 3 {
		t.Fatalf("daily spend after retention: %+v, %v", spend, err)
	}
}

func mustUserUsed(t *testing.T, s store.Store, id int64) int64 {
	t.Helper()
	u, err := s.UserByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.UsedQuota
}
