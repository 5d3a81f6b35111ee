package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	q, args, err := usageQuery(f, idColumn)
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
		types, indexes := lookups(planOf(t, s, f, "upstream_request_id"), day)
		if name == "a user" {
			// the user's own index or the bloom filters, but no scan
			for _, ty := range types {
				if ty == "Seq Scan" {
					t.Errorf("%s: %s read by %v %v", name, day, types, indexes)
				}
			}
			continue
		}
		ok := len(types) == 2 && types[0] == "Bitmap Heap Scan" && types[1] == "Bitmap Index Scan" &&
			strings.HasSuffix(indexes[1], "_upstream_request_id_idx")
		if !ok {
			t.Errorf("%s: %s read by %v %v, want a bitmap scan of its upstream request id's bloom filters", name, day, types, indexes)
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
	types, indexes = lookups(planOf(t, s, upstream, "upstream_request_id"), day)
	if len(indexes) != 2 || !strings.HasSuffix(indexes[1], "_upstream_request_id_idx") {
		t.Errorf("the upstream request id: %s read by %v %v, want its bloom filters", day, types, indexes)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT brin_summarize_new_values($1::regclass)`,
		day+"_created_at_upstream_request_id_idx").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d full ranges of %s without their bloom filters after the round", left, day)
	}
}
