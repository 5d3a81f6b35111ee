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
	exported := exportAll(t, s, 3)
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

// exportAll reads every usage row as the export does, pages of size rows
// by id from 0, and fails unless the ids increase throughout.
func exportAll(t *testing.T, s store.Store, size int) []*store.UsageLog {
	t.Helper()
	var all []*store.UsageLog
	for after := int64(0); ; {
		page, err := s.UsageSince(context.Background(), time.Time{}, after, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		for _, l := range page {
			if l.ID <= after {
				t.Fatalf("export: id %d after %d", l.ID, after)
			}
			after = l.ID
		}
		all = append(all, page...)
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

// A keyed row is written once whatever day it would land in: replayed
// with its time, into its own day, even one that is not today; replayed
// without a time (which puts it at the batch's time, today), it is still
// found in the day it went to first, and neither its row nor its charge
// comes twice.
func testUsageDaysKeyedOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "keyed-days", 1000)
	at := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3).Add(5 * time.Hour)
	row := func(key string, when time.Time) *store.UsageLog {
		return &store.UsageLog{Key: key, UserID: u.ID, Cost: 10, Status: 200, CreatedAt: when}
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{row("k1", at), row("k2", at.Add(24*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	replay := []*store.UsageLog{row("k1", at), row("k2", at.Add(24*time.Hour)), row("k3", at)}
	if err := s.SettleBatch(ctx, replay); err != nil {
		t.Fatal(err)
	}
	if replay[0].ID != 0 || replay[1].ID != 0 || replay[2].ID == 0 {
		t.Fatalf("replayed ids %d %d %d: only the new key gets one", replay[0].ID, replay[1].ID, replay[2].ID)
	}
	untimed := []*store.UsageLog{row("k1", time.Time{}), row("k2", time.Time{}), row("k4", time.Time{}), row("k4", time.Time{})}
	if err := s.SettleBatch(ctx, untimed); err != nil {
		t.Fatal(err)
	}
	if untimed[0].ID != 0 || untimed[1].ID != 0 || untimed[2].ID == 0 || untimed[3].ID != 0 {
		t.Fatalf("untimed ids %d %d %d %d: a key stored in another day, or earlier in the batch, gets none",
			untimed[0].ID, untimed[1].ID, untimed[2].ID, untimed[3].ID)
	}
	if n, err := s.CountUsage(ctx); err != nil || n != 4 {
		t.Fatalf("%d rows (%v), want 4", n, err)
	}
	if got := mustGetUser(t, s, u.ID); got.UsedQuota != 40 || got.RequestCount != 4 {
		t.Fatalf("user charged %d for %d requests, want 40 for 4", got.UsedQuota, got.RequestCount)
	}
}

// A row of a day far in the past (before 1970), on the epoch's own day or
// far in the future lands, and every read finds it where its time puts
// it: the listing newest first, its request id, its time range, the
// export once each in id order; retention takes the past and leaves the
// future.
func testUsageFarDays(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "far", 1000)
	now := time.Now().UTC().Truncate(time.Millisecond)
	rows := []*store.UsageLog{
		{UserID: u.ID, CreatedAt: now, RequestID: "now", Status: 200},
		{UserID: u.ID, CreatedAt: time.Date(1965, 7, 1, 3, 0, 0, 0, time.UTC), RequestID: "past", Status: 200},
		{UserID: u.ID, CreatedAt: time.Date(2400, 2, 29, 22, 0, 0, 0, time.UTC), RequestID: "future", Status: 200},
		{UserID: u.ID, CreatedAt: time.UnixMilli(5).UTC(), RequestID: "epoch", Status: 200},
		{UserID: u.ID, CreatedAt: time.Date(1970, 1, 2, 1, 0, 0, 0, time.UTC), RequestID: "day1", Status: 200},
		{UserID: u.ID, CreatedAt: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), RequestID: "year12000", Status: 200},
	}
	if err := s.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.RequestID)
	}
	if want := []string{"year12000", "future", "now", "day1", "epoch", "past"}; !slices.Equal(names, want) {
		t.Fatalf("newest first: %v, want %v", names, want)
	}
	for _, r := range rows {
		f, err := s.ListUsage(ctx, store.UsageFilter{RequestID: r.RequestID})
		if err != nil || len(f) != 1 || f[0].ID != r.ID || !f[0].CreatedAt.Equal(r.CreatedAt) {
			t.Fatalf("request id %s: %+v (%v)", r.RequestID, f, err)
		}
		f, err = s.ListUsage(ctx, store.UsageFilter{Since: r.CreatedAt, Until: r.CreatedAt.Add(time.Millisecond)})
		if err != nil || len(f) != 1 || f[0].ID != r.ID {
			t.Fatalf("the time range of %s: %+v (%v)", r.RequestID, f, err)
		}
	}
	if exported := exportAll(t, s, 2); len(exported) != len(rows) {
		t.Fatalf("the export read %d rows, want the %d once each", len(exported), len(rows))
	}
	// retention takes the past and leaves the future
	cutoff := now.Add(-time.Hour)
	if days, ok := s.(store.UsageDays); ok {
		if _, err := days.DropUsageDays(ctx, cutoff); err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := s.DeleteUsageBefore(ctx, cutoff, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	got, err = s.ListUsage(ctx, store.UsageFilter{})
	if err != nil || len(got) != 3 || got[0].RequestID != "year12000" || got[1].RequestID != "future" || got[2].RequestID != "now" {
		t.Fatalf("after retention: %+v (%v)", got, err)
	}
}
