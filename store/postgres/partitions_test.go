package postgres

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/store"
)

// partitionOf says which partition holds the row of key.
func partitionOf(t *testing.T, s *Store, key string) string {
	t.Helper()
	var name string
	if err := s.pool.QueryRow(context.Background(), `SELECT tableoid::regclass::text FROM usage_logs WHERE row_key = $1`, key).Scan(&name); err != nil {
		t.Fatalf("row %s: %v", key, err)
	}
	return name
}

// Rows land in their day's partition, or in the default one until their
// day is made, which moves them in; a replayed batch writes nothing in any
// day; retention drops whole expired days and leaves the rest to the
// batched delete.
func TestUsageDayPartitions(t *testing.T) {
	ctx := context.Background()
	st, err := Open(testCluster.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	now := time.Now().UTC()
	today := now.UnixMilli() / store.MsPerDay
	days, err := s.dayPartitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for d := today; d <= today+partitionsAhead; d++ {
		if days[d] != dayPartition(d) {
			t.Fatalf("no partition for day %d (%s) after open: %v", d, dayPartition(d), days)
		}
	}
	twoDaysAgo := time.UnixMilli((today - 2) * store.MsPerDay).UTC().Add(time.Hour) // rows a second apart stay in one day
	batch := func() []*store.UsageLog {
		return []*store.UsageLog{
			{Key: "today", CreatedAt: now, UserID: 1, Cost: 1},
			{Key: "two-days-ago", CreatedAt: twoDaysAgo, UserID: 1, Cost: 1},
			{Key: "also-two-days-ago", CreatedAt: twoDaysAgo.Add(time.Millisecond), UserID: 1, Cost: 1},
			{Key: "a-year-ago", CreatedAt: now.AddDate(-1, 0, 0), UserID: 1, Cost: 1},
		}
	}
	if err := s.SettleBatch(ctx, batch()); err != nil {
		t.Fatal(err)
	}
	if p := partitionOf(t, s, "today"); p != dayPartition(today) {
		t.Fatalf("today's row in %s", p)
	}
	if p := partitionOf(t, s, "two-days-ago"); p != "usage_logs_default" {
		t.Fatalf("a row of a day without partition in %s", p)
	}
	old := twoDaysAgo.UnixMilli() / store.MsPerDay
	if err := s.makeDay(ctx, old); err != nil {
		t.Fatal(err)
	}
	if p := partitionOf(t, s, "two-days-ago"); p != dayPartition(old) {
		t.Fatalf("the row did not move into its day: %s", p)
	}
	// a day made by the store takes new rows, ids from the one sequence
	late := []*store.UsageLog{{Key: "late", CreatedAt: twoDaysAgo.Add(time.Second), UserID: 1, Cost: 1}}
	if err := s.SettleBatch(ctx, late); err != nil {
		t.Fatal(err)
	}
	if p := partitionOf(t, s, "late"); p != dayPartition(old) || late[0].ID <= 4 {
		t.Fatalf("a new row of a made day: in %s, id %d", p, late[0].ID)
	}

	again := batch()
	if err := s.SettleBatch(ctx, again); err != nil {
		t.Fatal(err)
	}
	for _, l := range again {
		if l.ID != 0 {
			t.Fatalf("replayed row %s written again as %d", l.Key, l.ID)
		}
	}
	if n, _ := s.CountUsage(ctx); n != 5 {
		t.Fatalf("%d rows after the replay, want 5", n)
	}

	cutoff := now.Add(-24 * time.Hour) // yesterday is partly expired, the day before wholly
	dropped, err := s.DropUsageDays(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 3 {
		t.Fatalf("dropped %d rows, want the 3 of two days ago", dropped)
	}
	if days, _ := s.dayPartitions(ctx); days[old] != "" || days[today] == "" {
		t.Fatalf("partitions after the drop: %v", days)
	}
	if n, err := s.DeleteUsageBefore(ctx, cutoff, 10); err != nil || n != 1 {
		t.Fatalf("the batched delete took %d rows, %v; want the year-old one in the default partition", n, err)
	}
	left, err := s.UsageSince(ctx, time.Time{}, 0, 10)
	if err != nil || len(left) != 1 || left[0].Key != "today" {
		t.Fatalf("left %+v, %v", left, err)
	}
	// the money and the daily totals stay
	days2, err := s.DailyUsageByModel(ctx, 1, time.Time{})
	if err != nil || len(days2) != 3 {
		t.Fatalf("daily totals %v, %v", days2, err)
	}
}

// The migration moves existing rows into their days with their ids and
// keys, and new rows continue the ids.
func TestUsagePartitionsMigration(t *testing.T) {
	ctx := context.Background()
	dsn := testCluster.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.LoadMigrations(migrations)
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, m := range all {
		if m.Version < 26 {
			before[m.Name] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if err := migrate(ctx, pool, before); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	for i, key := range []string{"k1", "k2", "k3"} {
		if _, err := pool.Exec(ctx, `INSERT INTO usage_logs (id, created_at, user_id, row_key, model)
			VALUES ($1, $2, 7, $3, 'm')`, 100+i, day.AddDate(0, 0, i).UnixMilli(), key); err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()

	st, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	for i, key := range []string{"k1", "k2", "k3"} {
		if p, want := partitionOf(t, s, key), dayPartition(day.AddDate(0, 0, i).UnixMilli()/store.MsPerDay); p != want {
			t.Fatalf("%s in %s, want %s", key, p, want)
		}
	}
	logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: 7})
	if err != nil || len(logs) != 3 || logs[0].ID != 102 || logs[0].Key != "k3" || logs[2].ID != 100 {
		t.Fatalf("rows after the migration %+v, %v", logs, err)
	}
	replay := []*store.UsageLog{{Key: "k2", CreatedAt: day.AddDate(0, 0, 1), UserID: 7}, {Key: "new", UserID: 7}}
	if err := s.SettleBatch(ctx, replay); err != nil {
		t.Fatal(err)
	}
	if replay[0].ID != 0 || replay[1].ID <= 102 {
		t.Fatalf("ids %d %d: the moved key is known, a new row continues the ids", replay[0].ID, replay[1].ID)
	}
}
