package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
	"github.com/caddy-model-gateway/gateway/store"
)

// BenchmarkInsertUsage compares three ways of writing a batch of usage
// rows with the row key's exactly-once guard, each in its own transaction
// on one connection, as the usage writer commits them:
//
//   - rowwise: one INSERT ... ON CONFLICT per row, queued in a pgx.Batch
//     (one round trip; the server runs a statement per row), as the store
//     wrote them before issue 34;
//   - unnest: one INSERT ... SELECT FROM unnest(arrays) (insertUsage);
//   - copy: the copy protocol into a temporary staging table, then one
//     INSERT ... SELECT from it with the same ON CONFLICT.
//
// Besides ns/op (a batch) it reports the client's wall time per row and
// the server backend's CPU per row, read from /proc/<pid>/stat of the
// connection's backend (the cluster is this machine's).
//
//	go test ./store/postgres/ -run '^$' -bench InsertUsage -benchtime 200x
func BenchmarkInsertUsage(b *testing.B) {
	for _, size := range []int{100, 500} {
		for _, way := range []struct {
			name   string
			insert func(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time) error
		}{
			{"rowwise", insertRowwise},
			{"unnest", insertRows},
			{"copy", insertCopy},
		} {
			b.Run(fmt.Sprintf("%s/rows=%d", way.name, size), func(b *testing.B) {
				benchInsert(b, size, way.insert)
			})
		}
	}
}

func benchInsert(b *testing.B, size int, insert func(context.Context, pgx.Tx, []*store.UsageLog, []int64, time.Time) error) {
	benchInsertWith(b, size, insert, nil)
}

func benchInsertDropping(b *testing.B, size int, drop []string) {
	benchInsertWith(b, size, insertRows, drop)
}

func benchInsertWith(b *testing.B, size int, insert func(context.Context, pgx.Tx, []*store.UsageLog, []int64, time.Time) error, drop []string) {
	ctx := context.Background()
	s, err := Open(testCluster.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, ix := range drop {
		if _, err := s.(*Store).pool.Exec(ctx, `DROP INDEX `+ix); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := s.(*Store).pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	logs := make([]*store.UsageLog, size)
	ids := make([]int64, size)
	seq := 0
	fill := func() {
		now := time.Now()
		for i := range logs {
			seq++
			logs[i] = &store.UsageLog{
				Key: "bench-0001-" + strconv.FormatInt(int64(seq), 36), CreatedAt: now,
				UserID: int64(seq%64 + 1), TokenID: int64(seq%64 + 100), Model: "gpt-4o-mini", Channel: "openai",
				Endpoint: "/v1/chat/completions", PromptTokens: 812, CompletionTokens: 233,
				Cost: 1_337, Status: 200, Stream: true, LatencyMS: 950, TTFBMS: 210,
				RequestID: fmt.Sprintf("%013x%019d", now.UnixMilli(), seq), UpstreamRequestID: "chatcmpl-" + strconv.Itoa(seq),
			}
		}
	}
	fill() // a warm-up batch: statements prepared, staging table made
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { clear(ids); return insert(ctx, tx, logs, ids, now()) }); err != nil {
		b.Fatal(err)
	}
	cpu0 := procCPU(b, pid)
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { clear(ids); return insert(ctx, tx, logs, ids, now()) })
		if err != nil {
			b.Fatal(err)
		}
		if ids[size-1] == 0 {
			b.Fatal("a new row got no id")
		}
	}
	cpu := procCPU(b, pid) - cpu0
	rows := float64(b.N * size)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/rows, "µs/row")
	b.ReportMetric(float64(cpu.Microseconds())/rows, "server-cpu-µs/row")
	// the replay of the last batch writes nothing and finds every key
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { clear(ids); return insert(ctx, tx, logs, ids, now()) }); err != nil {
		b.Fatal(err)
	}
	for i, id := range ids {
		if id != 0 {
			b.Fatalf("replayed row %d written again as %d", i, id)
		}
	}
}

// procCPU is a process's user and system CPU from /proc.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// the fields after the command name, which may hold spaces
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}

// insertRowwise is the store's insert before issue 34: a statement per row.
func insertRowwise(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time) error {
	const q = `INSERT INTO usage_logs (created_at, user_id, token_id,
	model, channel, endpoint, prompt_tokens, completion_tokens, cached_tokens,
	reasoning_tokens, cost, status, estimated, stream, latency_ms, ttfb_ms, error,
	request_id, upstream_request_id, row_key, trace_id, windows, plan, cache_hit, cache_saved, price_tier)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)
	ON CONFLICT DO NOTHING RETURNING id`
	clear(ids)
	b := &pgx.Batch{}
	for _, l := range logs {
		createdAt := l.CreatedAt
		if createdAt.IsZero() {
			createdAt = ts
		}
		b.Queue(q, createdAt.UnixMilli(), l.UserID, l.TokenID,
			l.Model, l.Channel, l.Endpoint, l.PromptTokens, l.CompletionTokens, l.CachedTokens,
			l.ReasoningTokens, l.Cost, l.Status, l.Estimated, l.Stream,
			l.LatencyMS, l.TTFBMS, l.Error, l.RequestID, l.UpstreamRequestID, nullString(l.Key), l.TraceID, l.Windows, l.Plan, l.CacheHit, l.CacheSaved, l.PriceTier)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for i := range logs {
		err := br.QueryRow().Scan(&ids[i])
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return br.Close()
}

var usageCopyColumns = []string{"ord", "created_at", "user_id", "token_id",
	"model", "channel", "endpoint", "prompt_tokens", "completion_tokens", "cached_tokens",
	"reasoning_tokens", "cost", "status", "estimated", "stream", "latency_ms", "ttfb_ms", "error",
	"request_id", "upstream_request_id", "row_key", "trace_id", "windows", "plan", "cache_hit", "cache_saved", "price_tier"}

// insertCopy copies the rows into a staging table of the connection's
// (emptied at commit) and inserts them from there with the guard.
func insertCopy(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time) error {
	clear(ids)
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS usage_stage ON COMMIT DELETE ROWS AS
		SELECT 0::int AS ord, `+strings.Join(usageCopyColumns[1:], ", ")+` FROM usage_logs WITH NO DATA`); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"usage_stage"}, usageCopyColumns,
		pgx.CopyFromSlice(len(logs), func(i int) ([]any, error) {
			l := logs[i]
			createdAt := l.CreatedAt
			if createdAt.IsZero() {
				createdAt = ts
			}
			return []any{int32(i), createdAt.UnixMilli(), l.UserID, l.TokenID,
				l.Model, l.Channel, l.Endpoint, l.PromptTokens, l.CompletionTokens, l.CachedTokens,
				l.ReasoningTokens, l.Cost, int32(l.Status), l.Estimated, l.Stream,
				l.LatencyMS, l.TTFBMS, l.Error, l.RequestID, l.UpstreamRequestID, nullString(l.Key), l.TraceID, l.Windows, l.Plan, l.CacheHit, l.CacheSaved, l.PriceTier}, nil
		}))
	if err != nil {
		return err
	}
	cols := strings.Join(usageCopyColumns[1:], ", ")
	rows, err := tx.Query(ctx, `INSERT INTO usage_logs (`+cols+`) SELECT `+cols+
		` FROM usage_stage ORDER BY ord ON CONFLICT DO NOTHING RETURNING id, row_key`)
	if err != nil {
		return err
	}
	defer rows.Close()
	byKey := map[string]int{}
	for i := len(logs) - 1; i >= 0; i-- {
		byKey[logs[i].Key] = i
	}
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return err
		}
		ids[byKey[key]] = id
	}
	return rows.Err()
}

// BenchmarkUsageIndexCost is BenchmarkInsertUsage's unnest insert of
// batches of 500 rows into the day-partitioned table with all its indexes
// (all), without one of them (-name), and with only the keys (keys: the
// primary key and the row key's guard), so a row's cost per index is the
// difference to all. Its CPU figures move with the machine's load: compare
// them within one run.
//
//	go test ./store/postgres/ -run '^$' -bench UsageIndexCost -benchtime 100x
func BenchmarkUsageIndexCost(b *testing.B) {
	droppable := []string{"usage_logs_created_at", "usage_logs_user_id_created_at",
		"usage_logs_token_id_created_at", "usage_logs_model_created_at", "usage_logs_channel_created_at",
		"usage_logs_failed_created_at", "usage_logs_request_id", "usage_logs_upstream_request_id"}
	cases := [][]string{nil}
	for _, ix := range droppable {
		cases = append(cases, []string{ix})
	}
	cases = append(cases, droppable)
	for _, drop := range cases {
		name := "all"
		switch len(drop) {
		case 1:
			name = "-" + drop[0]
		case len(droppable):
			name = "keys"
		}
		b.Run(name, func(b *testing.B) {
			benchInsertDropping(b, 500, drop)
		})
	}
}

// BenchmarkSettleRows is the whole write of a batch (the rows, the
// charges, the daily rollups), as the usage writer commits it, with the
// rollups' upserts one statement a key (perkey: the store before) and one
// statement a table (queueRollups), the two interleaved batch by batch on
// two connections, so the server backend's CPU per row of each is
// compared under the same load: batches of 10 rows of one user, key,
// model and channel (a gateway at c=50 in the bench) and of 500 usagegen
// rows (many users).
//
//	go test ./store/postgres/ -run '^$' -bench SettleRows -benchtime 300x
func BenchmarkSettleRows(b *testing.B) {
	for _, size := range []int{10, 500} {
		b.Run(fmt.Sprintf("rows=%d", size), func(b *testing.B) {
			ctx := context.Background()
			gen := usagegen.New(usagegen.Config{Rows: 1 << 40, Days: 1, Batch: size, End: time.Now()})
			cfg := gen.Config()
			gen.UserIDs, gen.Keys = make([]int64, cfg.Users), make([][]int64, cfg.Users)
			for u := range cfg.Users {
				gen.UserIDs[u], gen.Keys[u] = int64(u+1), []int64{int64(3*u + 1)}
			}
			// a database each, so both write every row
			var pools [2]*pgxpool.Pool
			var conns [2]*pgxpool.Conn
			var pids [2]int
			for i := range conns {
				s, err := Open(testCluster.Database(b))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				pools[i] = s.(*Store).pool
				if conns[i], err = pools[i].Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				defer conns[i].Release()
				if err := conns[i].QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pids[i]); err != nil {
					b.Fatal(err)
				}
			}
			ways := [2]func(context.Context, pgx.Tx, []*store.UsageLog, []int64, time.Time, map[string]int64) error{
				settleRowsPerKey, settleRows}
			var cpu [2]time.Duration
			rows := 0
			for b.Loop() {
				logs := gen.Next()
				if size == 10 { // one user, key, model and channel
					for _, l := range logs {
						l.UserID, l.TokenID, l.Model, l.Channel = 1, 1, "gpt-4o-mini", "openai"
					}
				}
				for j := range ways { // each first in turn
					i := (j + rows/size) % 2
					settle := ways[i]
					ids := make([]int64, len(logs))
					c0 := procCPU(b, pids[i])
					if err := pgx.BeginFunc(ctx, conns[i], func(tx pgx.Tx) error { return settle(ctx, tx, logs, ids, now(), nil) }); err != nil {
						b.Fatal(err)
					}
					cpu[i] += procCPU(b, pids[i]) - c0
				}
				rows += len(logs)
			}
			b.ReportMetric(float64(cpu[0].Microseconds())/float64(rows), "perkey-server-µs/row")
			b.ReportMetric(float64(cpu[1].Microseconds())/float64(rows), "tables-server-µs/row")
			// both ways wrote the same rollups
			var sums [2][3]int64
			for i, pool := range pools {
				if err := pool.QueryRow(ctx, `SELECT (SELECT SUM(requests) FROM usage_daily_totals WHERE grp = 'model'),
					(SELECT SUM(cost) FROM usage_daily), (SELECT SUM(prompt_tokens) FROM usage_daily_models)`).Scan(&sums[i][0], &sums[i][1], &sums[i][2]); err != nil {
					b.Fatal(err)
				}
			}
			if sums[0] != sums[1] || sums[0][0] != int64(rows) {
				b.Fatalf("rollups differ: %v against %v, %d rows", sums[0], sums[1], rows)
			}
		})
	}
}

// settleRowsPerKey is settleRows as it was before the rollups went in one
// statement a table: an upsert a key.
func settleRowsPerKey(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time, windows map[string]int64) error {
	clear(ids)
	if err := insertRows(ctx, tx, logs, ids, ts); err != nil {
		return err
	}
	sums := store.NewBatchCharges(windows)
	for i, l := range logs {
		if ids[i] != 0 {
			sums.Add(l, l.CreatedAt)
		}
	}
	b := &pgx.Batch{}
	for _, id := range sums.UserIDs() {
		c := sums.Users[id]
		b.Queue(chargeUser, c.Cost, c.Requests, id)
	}
	for _, id := range sums.TokenIDs() {
		b.Queue(chargeToken, sums.Tokens[id], id)
	}
	for _, k := range sums.DayKeys() {
		d := sums.Days[k]
		b.Queue(addDaily, k.User, k.Day, d.Cost, d.Requests)
	}
	for _, k := range sums.ModelKeys() {
		t := sums.Models[k]
		b.Queue(addDailyModel, k.Day, k.User, k.Model, t.Requests, t.PromptTokens,
			t.CompletionTokens, t.CachedTokens, t.ReasoningTokens, t.Cost)
	}
	for _, k := range sums.TotalKeys() {
		t := sums.Totals[k]
		b.Queue(addDailyTotal, string(k.By), k.Day, k.Key(), t.Requests, t.Errors, t.Cost, t.Tokens,
			t.PromptTokens, t.CachedTokens, t.LatencyMS, t.TTFBMS, t.CacheHits, t.CacheSaved)
	}
	queueWindowSpend(b, sums.Windows)
	return tx.SendBatch(ctx, b).Close()
}
