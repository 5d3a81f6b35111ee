package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
	"github.com/caddy-model-gateway/gateway/store"
)

// planNode is one node of a plan: what it does, on which table, by which
// index.
type planNode struct {
	Type, Relation, Index string
}

// planOf is the plan of the statement ListUsage sends for f, its id
// looked for in idColumn, with f's values planned in (a custom plan, as
// pgx's prepared statements get for their first runs).
func planOf(t *testing.T, s *Store, f store.UsageFilter, idColumn string) []planNode {
	t.Helper()
	q, args, err := usageQuery(f, idColumn, partOf(t, s, f.RequestID, idColumn))
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := s.pool.QueryRow(context.Background(), `EXPLAIN (FORMAT JSON) `+q, args...).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	type node struct {
		Type     string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Index    string `json:"Index Name"`
		Plans    []node `json:"Plans"`
	}
	var plans []struct{ Plan node }
	if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain: %v\n%s", err, raw)
	}
	var out []planNode
	var walk func(n node)
	walk = func(n node) {
		out = append(out, planNode{n.Type, n.Relation, n.Index})
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return out
}

// partOf is the upstream request id's part of id as listUsage asks for
// it, -1 when idColumn is another column.
func partOf(t *testing.T, s *Store, id, idColumn string) int {
	t.Helper()
	if idColumn != "upstream_request_id" {
		return -1
	}
	part := -1
	if err := s.pool.QueryRow(context.Background(), `SELECT `+upstreamPartOf, id).Scan(&part); err != nil {
		t.Fatal(err)
	}
	return part
}

// indexPart is the part of the upstream request id's bloom filters that a
// day's index idx belongs to (the number of the usage_logs_upstream_part
// index it is attached to), -1 for any other index.
func indexPart(t *testing.T, s *Store, idx string) int {
	t.Helper()
	var parent string
	if err := s.pool.QueryRow(context.Background(), `SELECT COALESCE((SELECT p.relname FROM pg_inherits i
		JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = to_regclass($1)), '')`, idx).Scan(&parent); err != nil {
		t.Fatal(err)
	}
	k, ok := strings.CutPrefix(parent, "usage_logs_upstream_part")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(k)
	if err != nil {
		return -1
	}
	return n
}

// readsPart says whether plan reads day by a bitmap scan of the upstream
// request id's part index of the given part, and how it reads it.
func readsPart(t *testing.T, s *Store, plan []planNode, day string, part int) (bool, string) {
	t.Helper()
	types, indexes := lookups(plan, day)
	how := fmt.Sprint(types, indexes)
	return len(types) == 2 && types[0] == "Bitmap Heap Scan" && types[1] == "Bitmap Index Scan" &&
		indexPart(t, s, indexes[1]) == part, how
}

// fillToday writes rows through SettleBatch, as the usage writer does,
// all in today's partition (the rows' times run up to the day's end), and
// returns the newest of them.
func fillToday(t *testing.T, s *Store, rows int64) *store.UsageLog {
	t.Helper()
	ctx := context.Background()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	g := usagegen.New(usagegen.Config{Rows: rows, Days: 1, Users: 50, Models: 8, Channels: 4, Batch: 2000,
		End: today.Add(24*time.Hour - time.Minute)})
	if err := g.Fill(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	newest, err := s.ListUsage(ctx, store.UsageFilter{Limit: 50})
	if err != nil || len(newest) == 0 {
		t.Fatalf("newest rows: %v", err)
	}
	for _, l := range newest {
		if l.UpstreamRequestID != "" {
			return l
		}
	}
	t.Fatal("no upstream request id among the newest rows")
	return nil
}

// lookups says how plan reads day: the nodes on its table and the
// indexes they use.
func lookups(plan []planNode, day string) (types, indexes []string) {
	for _, n := range plan {
		if n.Relation == day || strings.HasPrefix(n.Index, day+"_") {
			types, indexes = append(types, n.Type), append(indexes, n.Index)
		}
	}
	return types, indexes
}

// The upstream request id (no b-tree, by design) is looked up through the
// day's BRIN bloom filters, over a day, an hour or all time: never by
// reading the whole day (a sequential scan: 190-260 ms a day of 555,555
// rows) or by walking its created_at index.
func TestUpstreamRequestIDReadsBloomFilters(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	newest := fillToday(t, s, 20000)
	if _, err := s.pool.Exec(ctx, `ANALYZE usage_logs`); err != nil {
		t.Fatal(err)
	}
	day := dayPartition(newest.CreatedAt.UnixMilli() / store.MsPerDay)
	for name, f := range map[string]store.UsageFilter{
		"last day":  {Since: newest.CreatedAt.Add(-24 * time.Hour)},
		"last hour": {Since: newest.CreatedAt.Add(-time.Hour)},
		"all time":  {},
		"a user":    {UserID: newest.UserID, Since: newest.CreatedAt.Add(-24 * time.Hour)},
	} {
		f.RequestID, f.Limit = newest.UpstreamRequestID, 20
		plan := planOf(t, s, f, "upstream_request_id")
		types, indexes := lookups(plan, day)
		if name == "a user" {
			// the user's own index or the bloom filters, but no scan
			for _, ty := range types {
				if ty == "Seq Scan" {
					t.Errorf("%s: %s read by %v %v", name, day, types, indexes)
				}
			}
			continue
		}
		part := partOf(t, s, f.RequestID, "upstream_request_id")
		ok, how := readsPart(t, s, plan, day, part)
		if name == "last hour" && !ok {
			// the hour's rows by created_at are as good here: this day of
			// 20,000 rows has about 830 in an hour, fewer pages than one
			// block range of the filters (128 pages); at 5 million rows
			// the hour is read through the part's filters
			ok = len(types) == 2 && types[0] == "Bitmap Heap Scan" && types[1] == "Bitmap Index Scan" &&
				strings.HasSuffix(indexes[1], "_created_at_id_idx")
		}
		if !ok {
			t.Errorf("%s: %s read by %s, want a bitmap scan of part %d of its upstream request id's bloom filters", name, day, how, part)
		}
	}
	// and the store finds the row that way
	logs, err := s.ListUsage(ctx, store.UsageFilter{RequestID: newest.UpstreamRequestID, Since: newest.CreatedAt.Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) == 0 || logs[0].UpstreamRequestID != newest.UpstreamRequestID {
		t.Fatalf("upstream id %s: %d rows", newest.UpstreamRequestID, len(logs))
	}
}

// A day that holds rows but has no statistics yet (autovacuum has not
// come round) is analyzed by the store's round, and its full ranges get
// their bloom filters: before, the gateway's request id was looked for by
// walking every day's created_at index from the newest row back (the
// planner took the id to match 0.5 % of the unanalyzed day and expected
// the page's rows soon), and the upstream id by reading the day.
// tendRows is the fresh day's size in TestTendDaysAnalyzesAndSummarizesToday.
const tendRows = 300000

func TestTendDaysAnalyzesAndSummarizesToday(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	now := time.Now()
	day := dayPartition(now.UnixMilli() / store.MsPerDay)
	// autovacuum stays away, as when its workers are busy elsewhere
	if _, err := s.pool.Exec(ctx, `ALTER TABLE `+day+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// a day's worth as the planner sees it: the planner's guess for an
	// unanalyzed day (0.5 % of it) must exceed the page by far for the
	// walk to look cheap, so this day is filled in one statement rather
	// than through SettleBatch
	from := now.UTC().Truncate(24 * time.Hour).UnixMilli()
	if _, err := s.pool.Exec(ctx, `INSERT INTO usage_logs (created_at, user_id, token_id, model, channel, cost,
		status, request_id, upstream_request_id, row_key)
		SELECT $1::bigint + i * 200, i % 50, i % 50 + 1, 'model-' || i % 8, 'channel-' || i % 4, 100,
		200, md5('r' || i), 'chatcmpl-' || md5('u' || i), 'k' || i FROM generate_series(1, $2::bigint) i`, from, tendRows); err != nil {
		t.Fatal(err)
	}
	newest, err := s.ListUsage(ctx, store.UsageFilter{Limit: 1})
	if err != nil || len(newest) != 1 {
		t.Fatalf("newest row: %v", err)
	}
	gateway := store.UsageFilter{RequestID: newest[0].RequestID, Limit: 20}
	upstream := store.UsageFilter{RequestID: newest[0].UpstreamRequestID, Since: newest[0].CreatedAt.Add(-24 * time.Hour), Limit: 20}
	types, indexes := lookups(planOf(t, s, gateway, "request_id"), day)
	t.Logf("before: the gateway's request id read by %v %v", types, indexes)

	if err := s.tendDays(ctx, now); err != nil {
		t.Fatal(err)
	}
	types, indexes = lookups(planOf(t, s, gateway, "request_id"), day)
	if len(indexes) == 0 || !strings.HasSuffix(indexes[len(indexes)-1], "_request_id_idx") {
		t.Errorf("the gateway's request id: %s read by %v %v, want its request_id index", day, types, indexes)
	}
	part := partOf(t, s, upstream.RequestID, "upstream_request_id")
	if ok, how := readsPart(t, s, planOf(t, s, upstream, "upstream_request_id"), day, part); !ok {
		t.Errorf("the upstream request id: %s read by %s, want part %d of its bloom filters", day, how, part)
	}
	var left, parts int
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(SUM(brin_summarize_new_values(i.indexrelid)), 0), COUNT(*)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = to_regclass($1) AND a.amname = 'brin'`, day).Scan(&left, &parts); err != nil {
		t.Fatal(err)
	}
	if left != 0 || parts != upstreamParts {
		t.Errorf("%d ranges of %s's %d bloom filter parts not summarized after the round", left, day, parts)
	}
}

// An upstream request id is found in each of the 16 parts of its bloom
// filters, over its day and over all time, on a day made before migration
// 0030 (with 0028's single index, converted by the upgrade) and on one
// made after it, and each day is read through its part's index alone:
// the statement names the part, and nothing else lets the planner use a
// partial index.
func TestUpstreamRequestIDPartsAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	dsn := testCluster.Database(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	migrateBefore(t, ctx, pool, 30)
	const rows = 20000
	// rows of the width the gateway writes (about 300 bytes), so that a
	// day spans many block ranges
	fill := func(q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}, day int64, prefix string) {
		t.Helper()
		if _, err := q.Exec(ctx, `INSERT INTO usage_logs (created_at, user_id, model, channel, endpoint,
			request_id, upstream_request_id, trace_id, error)
			SELECT $1::bigint + g * 4000, 1 + g % 50, 'gpt-4o-mini-' || (g % 8), 'channel-' || (g % 4), '/v1/chat/completions',
			'req-' || $2 || g, $2 || md5(g::text), md5(g::text || 'trace'), repeat('e', 150)
			FROM generate_series(1, $3::int) g`, day*store.MsPerDay, prefix, rows); err != nil {
			t.Fatal(err)
		}
	}
	today := time.Now().UnixMilli() / store.MsPerDay
	fill(pool, today, "old-") // today's day: made by 0026, 0028's index
	var single bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('usage_logs_upstream_request_id') IS NOT NULL`).Scan(&single); err != nil || !single {
		t.Fatalf("before 0030: 0028's index present = %v, %v", single, err)
	}
	pool.Close()

	st, err := Open(dsn) // migrates 0030
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	later := today + 5 // a day made after the upgrade, as makeDays makes them
	if err := s.makeDay(ctx, later); err != nil {
		t.Fatal(err)
	}
	fill(s.pool, later, "new-")
	if _, err := s.pool.Exec(ctx, `ANALYZE usage_logs`); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int64{today, later} {
		if _, err := s.pool.Exec(ctx, `SELECT brin_summarize_new_values(i.indexrelid) FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
			WHERE i.indrelid = to_regclass($1) AND a.amname = 'brin'`, dayPartition(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('usage_logs_upstream_request_id') IS NOT NULL`).Scan(&single); err != nil || single {
		t.Fatalf("after 0030: 0028's index present = %v, %v", single, err)
	}

	for _, d := range []int64{today, later} {
		day := dayPartition(d)
		prefix := map[int64]string{today: "old-", later: "new-"}[d]
		for part := range upstreamParts {
			var id string
			var n int
			// an id of the day in this part, as the server hashes it
			if err := s.pool.QueryRow(ctx, `SELECT MIN(upstream_request_id), COUNT(*) FROM `+day+`
				WHERE (hashtext(upstream_request_id) & 15) = $1`, part).Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			if n < rows/upstreamParts/2 || !strings.HasPrefix(id, prefix) {
				t.Fatalf("%s part %d: %d rows, id %q", day, part, n, id)
			}
			if got := partOf(t, s, id, "upstream_request_id"); got != part {
				t.Fatalf("%s: part %d, want %d", id, got, part)
			}
			for name, f := range map[string]store.UsageFilter{
				"its day":  {RequestID: id, Since: time.UnixMilli(d * store.MsPerDay)},
				"all time": {RequestID: id},
			} {
				logs, err := s.ListUsage(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(logs) != 1 || logs[0].UpstreamRequestID != id {
					t.Fatalf("%s part %d, %s: %d rows for %s", day, part, name, len(logs), id)
				}
				f.Limit = 20
				if ok, how := readsPart(t, s, planOf(t, s, f, "upstream_request_id"), day, part); !ok {
					t.Errorf("%s part %d, %s: read by %s, want a bitmap scan of part %d's index", day, part, name, how, part)
				}
			}
		}
	}
}

// The upstream request id's statement is planned for its values at every
// run, never prepared and cached as pgx does by default: after five runs
// of a cached statement PostgreSQL may take its generic plan, which does
// not know the time range and walked every day's created_at index (2.3-4 s
// at 5 million rows, bench/README.md, "PostgreSQL: the upstream request id
// over all time").
func TestUpstreamRequestIDStatementNotCached(t *testing.T) {
	ctx := context.Background()
	st, err := Open(testCluster.Database(t) + "&pool_max_conns=1") // one connection: the one asked below
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	for range 7 {
		if _, err := s.ListUsage(ctx, store.UsageFilter{RequestID: "chatcmpl-nosuchid"}); err != nil {
			t.Fatal(err)
		}
	}
	var upstream, gateway int
	// the patterns are split so that this statement, cached too, does not match itself
	if err := s.pool.QueryRow(ctx, `SELECT
		COUNT(*) FILTER (WHERE statement LIKE '%upstream_request_id' || ' = %'),
		COUNT(*) FILTER (WHERE statement LIKE '%WHERE request_id' || ' = %')
		FROM pg_prepared_statements`).Scan(&upstream, &gateway); err != nil {
		t.Fatal(err)
	}
	if gateway == 0 {
		t.Fatal("the gateway's request id statement is not among the connection's cached statements: the check looks at the wrong connection")
	}
	if upstream != 0 {
		t.Errorf("the upstream request id's statement is cached (%d): its generic plan would come after five runs", upstream)
	}
}
