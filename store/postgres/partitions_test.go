package postgres

import (
	"context"
	"testing"
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
	s := openTestStore(t)
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
	migrateBefore(t, ctx, pool, 26)
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

// unpackedIndexes lists a partition's b-tree indexes that are not packed
// (fillfactor 100) or not valid.
func unpackedIndexes(t *testing.T, s *Store, partition string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = $1::regclass AND a.amname = 'btree'
		AND (NOT i.indisvalid OR NOT COALESCE(c.reloptions @> '{fillfactor=100}', false))
		ORDER BY c.relname`, partition)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// A closed day's indexes are rebuilt packed, one day a round, newest
// first, an hour after the day ends; today's are left as they are; the
// packed day's rows read as before and its row keys still guard replays.
func TestUsageDayPacking(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	now := time.Now().UTC()
	today := now.UnixMilli() / store.MsPerDay
	for _, d := range []int64{today - 2, today - 1} {
		if err := s.makeDay(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() []*store.UsageLog {
		var logs []*store.UsageLog
		for i, d := range []int64{today - 2, today - 1, today} {
			for j := range 50 {
				logs = append(logs, &store.UsageLog{Key: "k" + string(rune('a'+i)) + time.Duration(j).String(),
					CreatedAt: time.UnixMilli(d*store.MsPerDay + int64(j)*1000), UserID: int64(j%3 + 1), Model: "m", Cost: 1})
			}
		}
		return logs
	}
	if err := s.SettleBatch(ctx, rows()); err != nil {
		t.Fatal(err)
	}
	// enough rows of users 10 to 19 in the day before yesterday for their
	// index to split pages, in time order within each user
	var many []*store.UsageLog
	for j := range 3000 {
		many = append(many, &store.UsageLog{CreatedAt: time.UnixMilli((today-2)*store.MsPerDay + 3_600_000 + int64(j)),
			UserID: int64(10 + j%10), Cost: 1})
	}
	if err := s.SettleBatch(ctx, many); err != nil {
		t.Fatal(err)
	}
	userIndex := func() int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_relation_size(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE i.indrelid = $1::regclass AND c.relname LIKE '%user_id%'`, dayPartition(today-2)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := userIndex()
	all := len(unpackedIndexes(t, s, dayPartition(today)))
	if all < 8 {
		t.Fatalf("today's partition has %d indexes", all)
	}
	// within the hour after yesterday ended, only the day before is closed
	d, err := s.packDay(ctx, time.UnixMilli(today*store.MsPerDay+packAfter.Milliseconds()/2))
	if err != nil || d != today-2 {
		t.Fatalf("packed day %d (%v), want %d", d, err, today-2)
	}
	if left := unpackedIndexes(t, s, dayPartition(today-2)); len(left) != 0 {
		t.Fatalf("indexes left unpacked: %v", left)
	}
	if after := userIndex(); after >= before {
		t.Fatalf("the day's user index took %d bytes packed, %d before", after, before)
	}
	// the rebuilt indexes are still the partitioned indexes' partitions
	var attached, indexes int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(h.inhrelid), COUNT(*) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		LEFT JOIN pg_inherits h ON h.inhrelid = i.indexrelid WHERE i.indrelid = $1::regclass AND a.amname = 'btree'`,
		dayPartition(today-2)).Scan(&attached, &indexes); err != nil || attached != all || indexes != all {
		t.Fatalf("after packing: %d indexes, %d of them attached to usage_logs' (%v), want %d", indexes, attached, err, all)
	}
	if n := len(unpackedIndexes(t, s, dayPartition(today-1))); n != all {
		t.Fatalf("yesterday's indexes packed within the hour: %d of %d left", n, all)
	}
	if d, err := s.packDay(ctx, time.UnixMilli(today*store.MsPerDay+packAfter.Milliseconds()-60_000)); err != nil || d != -1 {
		t.Fatalf("a second round within the hour packed day %d (%v)", d, err)
	}
	if d, err := s.packDay(ctx, time.UnixMilli((today+1)*store.MsPerDay-1)); err != nil || d != today-1 {
		t.Fatalf("packed day %d (%v), want yesterday %d", d, err, today-1)
	}
	if n := len(unpackedIndexes(t, s, dayPartition(today))); n != all {
		t.Fatalf("today's indexes packed: %d of %d left", n, all)
	}
	// the packed days read and guard as before
	got, err := s.ListUsage(ctx, store.UsageFilter{UserID: 2, Until: time.UnixMilli(today * store.MsPerDay), Limit: 1000})
	if err != nil || len(got) != 2*17 {
		t.Fatalf("user 2's rows of the packed days: %d (%v), want 34", len(got), err)
	}
	replay := rows()
	if err := s.SettleBatch(ctx, replay); err != nil {
		t.Fatal(err)
	}
	for _, l := range replay {
		if l.ID != 0 {
			t.Fatalf("replayed row %s written again", l.Key)
		}
	}
	if n, err := s.CountUsage(ctx); err != nil || n != 3150 {
		t.Fatalf("%d rows (%v), want 3150", n, err)
	}
}
