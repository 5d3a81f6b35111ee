package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// TestUsageDayTables: each UTC day's rows go to a table of their own,
// whose ids are the day's; retention drops a whole day with one DROP
// TABLE (the table and its entry in usage_days gone, its rows counted).
func TestUsageDayTables(t *testing.T) {
	ctx := context.Background()
	st := openDays(t, filepath.Join(t.TempDir(), "days.db"))
	s := st.(*Store)
	u := dayUser(t, st, "dora")
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var logs []*store.UsageLog
	for i := range 9 {
		logs = append(logs, &store.UsageLog{UserID: u.ID, Model: "m", Cost: 1, Status: 200, CreatedAt: base.Add(time.Duration(i) * 8 * time.Hour)})
	}
	if err := st.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		d := l.CreatedAt.UnixMilli() / store.MsPerDay
		if l.ID <= d<<32 || l.ID > d<<32+3 {
			t.Fatalf("row of %v has id %d, not one of its day's (%d + 1..3)", l.CreatedAt, l.ID, d<<32)
		}
	}
	tables := func() []string {
		rows, err := s.r.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'usage_logs_%' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			_ = rows.Scan(&n)
			out = append(out, n)
		}
		return out
	}
	if got := tables(); len(got) != 3 || got[0] != "usage_logs_20260501" || got[2] != "usage_logs_20260503" {
		t.Fatalf("day tables %v", got)
	}
	n, err := s.DropUsageDays(ctx, base.Add(48*time.Hour+time.Minute))
	if err != nil || n != 6 {
		t.Fatalf("dropped %d rows, %v; want the 6 of two days", n, err)
	}
	var listed int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM usage_days`).Scan(&listed); err != nil || listed != 1 {
		t.Fatalf("usage_days lists %d days, %v", listed, err)
	}
	if got := tables(); len(got) != 1 || got[0] != "usage_logs_20260503" {
		t.Fatalf("day tables after the drop %v", got)
	}
	if n, err := s.DropUsageDays(ctx, base.Add(48*time.Hour+time.Minute)); err != nil || n != 0 {
		t.Fatalf("dropping again: %d, %v", n, err)
	}
}

// TestUsageRowsOfBeforeTheDayTables: a file upgraded with rows in
// usage_logs keeps serving them beside the day tables: listed in one
// order with the new rows, not written again when replayed, deleted by
// retention in batches; once usage_logs is empty its row keys are no
// longer looked up.
func TestUsageRowsOfBeforeTheDayTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "upgraded.db")
	st := openDays(t, path)
	u := dayUser(t, st, "olga")
	base := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	// rows as the store wrote them before migration 0027
	for i := range 4 {
		if _, err := st.(*Store).w.Exec(`INSERT INTO usage_logs (id, created_at, user_id, model, cost, status, row_key)
			VALUES (?, ?, ?, 'm', 1, 200, ?)`, 100+i, base.Add(time.Duration(i)*time.Hour).UnixMilli(), u.ID, "old-"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	st = openDays(t, path)
	s := st.(*Store)
	if !s.legacyRows.Load() {
		t.Fatal("an upgraded file's usage_logs rows are not known")
	}
	fresh := []*store.UsageLog{
		{UserID: u.ID, Model: "m", Cost: 1, Status: 200, CreatedAt: base.Add(90 * time.Minute), Key: "new-a"},
		{UserID: u.ID, Model: "m", Cost: 1, Status: 200, CreatedAt: base.Add(time.Hour), Key: "old-b"}, // replayed
	}
	if err := st.SettleBatch(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if fresh[1].ID != 0 {
		t.Fatalf("a row of usage_logs replayed was written again, id %d", fresh[1].ID)
	}
	all, err := st.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(all) != 5 {
		t.Fatalf("listed %d, %v; want 4 old and 1 new", len(all), err)
	}
	want := []int64{103, 102, fresh[0].ID, 101, 100}
	for i, l := range all {
		if l.ID != want[i] {
			t.Fatalf("row %d is %d, want %d (order %v)", i, l.ID, want[i], want)
		}
	}
	var deleted int64
	for {
		n, err := st.DeleteUsageBefore(ctx, base.Add(5*time.Hour), 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		deleted += n
	}
	if deleted != 5 || s.legacyRows.Load() {
		t.Fatalf("deleted %d, usage_logs still looked up: %v", deleted, s.legacyRows.Load())
	}
}

func openDays(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func dayUser(t *testing.T, st store.Store, name string) *store.User {
	t.Helper()
	u := &store.User{Username: name, PasswordHash: "hash", Quota: 1_000_000}
	if err := st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// A keyed row sent without a time is looked for in every day's table
// within the writer's transaction, not through the reading pool: on a
// ":memory:" store both are the one connection, which the transaction
// holds, so a read through the pool would wait for ever.
func TestUntimedKeyedRowOnOneConnection(t *testing.T) {
	s := openDays(t, ":memory:")
	u := dayUser(t, s, "mem-days")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	yesterday := time.Now().UTC().Add(-24 * time.Hour)
	if err := s.SettleBatch(ctx, []*store.UsageLog{{Key: "m1", UserID: u.ID, Cost: 3, CreatedAt: yesterday}}); err != nil {
		t.Fatal(err)
	}
	again := []*store.UsageLog{{Key: "m1", UserID: u.ID, Cost: 3}, {Key: "m2", UserID: u.ID, Cost: 4}}
	if err := s.SettleBatch(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again[0].ID != 0 || again[1].ID == 0 {
		t.Fatalf("ids %d %d: the key of yesterday's row gets none, the new one an id", again[0].ID, again[1].ID)
	}
	if got, err := s.UserByID(ctx, u.ID); err != nil || got.UsedQuota != 7 {
		t.Fatalf("charged %+v (%v), want 7", got, err)
	}
}

// A day table dropped by another process (the CLI's retention on the same
// file) while this store remembers it: the next row of that day makes it
// again within the same batch, and no batch fails for it.
func TestDayDroppedBehindTheStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "dropped.db")
	gw, cli := openDays(t, path), openDays(t, path)
	u := dayUser(t, gw, "dropped")
	old := time.Now().UTC().AddDate(0, 0, -10).Truncate(24 * time.Hour).Add(time.Hour)
	if err := gw.SettleBatch(ctx, []*store.UsageLog{{Key: "d1", UserID: u.ID, Cost: 1, CreatedAt: old}}); err != nil {
		t.Fatal(err)
	}
	if n, err := cli.(store.UsageDays).DropUsageDays(ctx, old.Add(24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("the other process dropped %d rows (%v), want 1", n, err)
	}
	late := []*store.UsageLog{
		{Key: "d2", UserID: u.ID, Cost: 2, CreatedAt: old.Add(time.Minute)}, // the dropped day, its table remembered
		{Key: "d3", UserID: u.ID, Cost: 4},                                  // untimed and keyed: every table looked in
	}
	if err := gw.SettleBatch(ctx, late); err != nil {
		t.Fatalf("a batch with a row of the dropped day: %v", err)
	}
	if late[0].ID == 0 || late[1].ID == 0 {
		t.Fatalf("ids %d %d", late[0].ID, late[1].ID)
	}
	got, err := gw.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(got) != 2 {
		t.Fatalf("listed %d rows (%v), want the two late ones", len(got), err)
	}
	if u2, err := gw.UserByID(ctx, u.ID); err != nil || u2.UsedQuota != 7 {
		t.Fatalf("charged %+v (%v), want 7", u2, err)
	}
}

// TestUntimedKeyedRowAmongManyDays: a keyed row sent without a time is
// looked for in every day's table however many there are (three years of
// days: more tables than one SQLite statement's expression may name).
func TestUntimedKeyedRowAmongManyDays(t *testing.T) {
	ctx := context.Background()
	st := openDays(t, filepath.Join(t.TempDir(), "many.db"))
	u := dayUser(t, st, "many")
	yesterday := time.Now().UTC().Truncate(24 * time.Hour).Add(-12 * time.Hour)
	var rows []*store.UsageLog
	for d := 1100; d >= 1; d-- {
		rows = append(rows, &store.UsageLog{Key: fmt.Sprintf("k%d", d), UserID: u.ID, Cost: 1, CreatedAt: yesterday.AddDate(0, 0, 1-d)})
	}
	if err := st.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}
	again := []*store.UsageLog{{Key: "k1", UserID: u.ID, Cost: 1}, {Key: "k1100", UserID: u.ID, Cost: 1}, {Key: "new", UserID: u.ID, Cost: 1}}
	if err := st.SettleBatch(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again[0].ID != 0 || again[1].ID != 0 || again[2].ID == 0 {
		t.Fatalf("ids %d %d %d: the newest and the oldest day's keys get none, the new one an id", again[0].ID, again[1].ID, again[2].ID)
	}
	if n, err := st.CountUsage(ctx); err != nil || n != 1101 {
		t.Fatalf("%d rows (%v), want 1101", n, err)
	}
}
