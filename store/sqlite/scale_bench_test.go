package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// BenchmarkUsageAtScale times what the console asks of the usage table: the
// first and the hundredth page of one user's rows and the 30-day spend
// chart, on a table of 10,000 rows and on one of 10,000,000, in one run, so
// the two can be compared (the large one should cost at most twice the
// small one). Not part of `make test`; run it with `make bench-store`, or
//
//	go test -run '^$' -bench UsageAtScale -benchtime 2000x -v ./store/sqlite
//
// Building the large table takes a few minutes; its file lives in a
// temporary directory removed at the end.
func BenchmarkUsageAtScale(b *testing.B) {
	// 4 users of 2,500 rows, and 1,000 users of 10,000: each has more than
	// the 100 pages of 20 the benchmark walks
	small := scaleStore(b, 10_000, 4)
	large := scaleStore(b, 10_000_000, 1_000)
	ctx := context.Background()
	const user = 1
	since := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -29)
	// each query on the small table, then at once on the large one, so the
	// two meet the same load on a shared machine
	for _, q := range []struct {
		name string
		run  func(s *Store, hundredth *store.UsageFilter) (int, error)
		want int
	}{
		{"first_page", func(s *Store, _ *store.UsageFilter) (int, error) {
			logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: user, Limit: pageSize})
			return len(logs), err
		}, pageSize},
		{"page_100", func(s *Store, hundredth *store.UsageFilter) (int, error) {
			logs, err := s.ListUsage(ctx, *hundredth)
			return len(logs), err
		}, pageSize},
		{"spend_30_days", func(s *Store, _ *store.UsageFilter) (int, error) {
			days, err := s.DailySpend(ctx, user, since)
			return min(len(days), 29), err
		}, 29},
	} {
		for _, table := range []struct {
			rows int
			s    *Store
		}{{10_000, small}, {10_000_000, large}} {
			hundredth := pageCursor(b, table.s, user, 100)
			b.Run(fmt.Sprintf("%s/rows=%d", q.name, table.rows), func(b *testing.B) {
				for b.Loop() {
					if n, err := q.run(table.s, hundredth); err != nil || n != q.want {
						b.Fatal(n, err)
					}
				}
			})
		}
	}
}

const pageSize = 20

// pageCursor walks to the start of page n of user's rows, outside the
// timings, and returns the filter that reads it.
func pageCursor(b *testing.B, s *Store, user int64, n int) *store.UsageFilter {
	f := store.UsageFilter{UserID: user, Limit: pageSize}
	for page := 1; page < n; page++ {
		logs, err := s.ListUsage(context.Background(), f)
		if err != nil || len(logs) != pageSize {
			b.Fatalf("page %d: %d rows, %v", page, len(logs), err)
		}
		last := logs[len(logs)-1]
		f.After = &store.UsageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return &f
}

// scaleStore builds a usage table of rows rows over users users and the
// last 90 days, newest row now, as one INSERT from a recursive CTE. The
// table's indexes (as the migrations made them) are dropped first and
// rebuilt after, which sorts once instead of inserting at random positions
// ten million times.
func scaleStore(b *testing.B, rows, users int) *Store {
	b.Helper()
	ctx := context.Background()
	st, err := Open(filepath.Join(b.TempDir(), "scale.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	s := st.(*Store)
	began := time.Now()

	var indexes []string
	rs, err := s.w.QueryContext(ctx, `SELECT sql FROM sqlite_master
		WHERE type = 'index' AND tbl_name = 'usage_logs' AND sql IS NOT NULL`)
	if err != nil {
		b.Fatal(err)
	}
	for rs.Next() {
		var q string
		if err := rs.Scan(&q); err != nil {
			b.Fatal(err)
		}
		indexes = append(indexes, q)
	}
	rs.Close()
	for _, q := range indexes {
		name := strings.Fields(q)[2] // CREATE INDEX <name> ON ...
		if _, err := s.w.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			b.Fatal(err)
		}
	}

	now := time.Now().UnixMilli()
	span := int64(90 * 24 * time.Hour / time.Millisecond)
	step := span / int64(rows)
	_, err = s.w.ExecContext(ctx, `WITH RECURSIVE seq(n) AS (
			SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < ?
		)
		INSERT INTO usage_logs (created_at, user_id, token_id, model, channel, endpoint,
			prompt_tokens, completion_tokens, cost, status, stream, latency_ms)
		SELECT ? - n * ?, 1 + n % ?, 1 + n % ?,
			CASE n % 3 WHEN 0 THEN 'gpt-4o-mini' WHEN 1 THEN 'claude-sonnet-4-6' ELSE 'gemini-2.5-flash' END,
			'openai', '/v1/chat/completions', 800 + n % 400, 200 + n % 100, 100 + n % 5000, 200, n % 2, 900
		FROM seq`, rows, now, step, users, users*2)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range indexes {
		if _, err := s.w.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	// the per-day totals SettleBatch keeps as it goes
	if _, err := s.w.ExecContext(ctx, `INSERT INTO usage_daily (user_id, day, cost, requests)
		SELECT user_id, created_at / ?, SUM(cost), COUNT(*) FROM usage_logs GROUP BY 1, 2`, store.MsPerDay); err != nil {
		b.Fatal(err)
	}
	var plan []string
	pr, err := s.r.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT `+store.UsageColumns+` FROM usage_logs
		WHERE user_id = ? AND created_at <= ? AND (created_at < ? OR id < ?) ORDER BY created_at DESC, id DESC LIMIT 20`, 1, now, now, 1)
	if err != nil {
		b.Fatal(err)
	}
	for pr.Next() {
		var id, parent, unused int
		var detail string
		if err := pr.Scan(&id, &parent, &unused, &detail); err != nil {
			b.Fatal(err)
		}
		plan = append(plan, detail)
	}
	pr.Close()
	b.Logf("%d usage rows over %d users built in %s; page query plan: %s", rows, users, time.Since(began).Round(time.Second), strings.Join(plan, "; "))
	return s
}
