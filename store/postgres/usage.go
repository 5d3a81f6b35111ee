package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// defaultUsageLimit is ListUsage's page size when the filter names none.
const defaultUsageLimit = 100

// SettleBatch writes every log and charges its cost, all in one
// transaction. Charges are summed per user and per token first, so a batch
// of thousands of rows from a few hundred users costs one UPDATE per user and
// token rather than two per row, and the statements travel in two round
// trips. Every row counts as one request of its user, failed ones too. A
// zero CreatedAt becomes now. IDs are set on the logs only once the
// transaction has committed.
//
// A row whose user or token does not exist (deleted since the request) is
// still written; its charge finds no row to update. Failing the batch for it
// would lose every other row with it.
func (s *Store) SettleBatch(ctx context.Context, logs []*store.UsageLog) error {
	if len(logs) == 0 {
		return nil
	}
	if err := store.CheckBatch(logs); err != nil {
		return err
	}
	ids := make([]int64, len(logs))
	ts := now()
	err := s.inTx(ctx, func(tx pgx.Tx) error { return settleRows(ctx, tx, logs, ids, ts, nil) })
	if err != nil {
		return fmt.Errorf("settle batch of %d: %w", len(logs), err)
	}
	store.SettledBatch(logs, ids, ts)
	return nil
}

// The charges, each sum saturating rather than failing the batch.
var (
	chargeUser = `UPDATE users SET quota = ` + subSat("quota", "$1") + `,
		used_quota = ` + addSat("used_quota", "$1") + `,
		request_count = request_count + $2 WHERE id = $3`
	chargeToken = `UPDATE tokens SET used_quota = ` + addSat("used_quota", "$1") + ` WHERE id = $2`
	addDaily    = `INSERT INTO usage_daily (user_id, day, cost, requests) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, day) DO UPDATE SET
		cost = ` + addSat("usage_daily.cost", "excluded.cost") + `,
		requests = usage_daily.requests + excluded.requests`
	addDailyModel = `INSERT INTO usage_daily_models (day, user_id, model, requests,
		prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (day, user_id, model) DO UPDATE SET
		requests = usage_daily_models.requests + excluded.requests,
		prompt_tokens = ` + addSat("usage_daily_models.prompt_tokens", "excluded.prompt_tokens") + `,
		completion_tokens = ` + addSat("usage_daily_models.completion_tokens", "excluded.completion_tokens") + `,
		cached_tokens = ` + addSat("usage_daily_models.cached_tokens", "excluded.cached_tokens") + `,
		reasoning_tokens = ` + addSat("usage_daily_models.reasoning_tokens", "excluded.reasoning_tokens") + `,
		cost = ` + addSat("usage_daily_models.cost", "excluded.cost")
	addDailyTotal = `INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens,
		prompt_tokens, cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (grp, day, key) DO UPDATE SET
		requests = usage_daily_totals.requests + excluded.requests,
		errors = usage_daily_totals.errors + excluded.errors,
		cost = ` + addSat("usage_daily_totals.cost", "excluded.cost") + `,
		tokens = ` + addSat("usage_daily_totals.tokens", "excluded.tokens") + `,
		prompt_tokens = ` + addSat("usage_daily_totals.prompt_tokens", "excluded.prompt_tokens") + `,
		cached_tokens = ` + addSat("usage_daily_totals.cached_tokens", "excluded.cached_tokens") + `,
		latency_ms = ` + addSat("usage_daily_totals.latency_ms", "excluded.latency_ms") + `,
		ttfb_ms = ` + addSat("usage_daily_totals.ttfb_ms", "excluded.ttfb_ms") + `,
		cache_hits = usage_daily_totals.cache_hits + excluded.cache_hits,
		cache_saved = ` + addSat("usage_daily_totals.cache_saved", "excluded.cache_saved")
)

// The rollups' upserts, many keys a statement: each takes its keys as
// arrays, sorted (the lock order), so a batch of rows of a thousand users
// costs three statements rather than several thousand. The server's work per
// batch is what a gateway on PostgreSQL pays on top of one on SQLite
// (bench/README.md, "PostgreSQL's usage row at 300 bytes").
var (
	addDailyRows      = rowsUpsert(addDaily, "$1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]")
	addDailyModelRows = rowsUpsert(addDailyModel, "$1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], "+
		"$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]")
	addDailyTotalRows = rowsUpsert(addDailyTotal, "$1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], "+
		"$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[]")
)

// rowsUpsert is the one-row upsert q taking its rows from arrays: its
// VALUES become a SELECT from unnest of arrays, in the order given.
func rowsUpsert(q, arrays string) string {
	i, j := strings.Index(q, "VALUES"), strings.Index(q, "ON CONFLICT")
	return q[:i] + "SELECT * FROM unnest(" + arrays + ")\n\t\t" + q[j:]
}

// rollupArrayKeys is the fewest keys a table's rollups take to go as one
// statement of arrays: below it, a statement a key costs the server less
// (the arrays' decoding and unnest's scan cost more than they save: 65.5
// against 60.5 µs a row for batches of one user's ten rows, above it 43
// against 62 for hundreds of users; BenchmarkSettleRows).
const rollupArrayKeys = 9

// queueRollups queues the upserts of the batch's daily rollups in the
// keys' sorted order: a table with many keys in one statement, one with
// few a statement a key.
func queueRollups(b *pgx.Batch, sums *store.BatchCharges) {
	if keys := sums.DayKeys(); len(keys) >= rollupArrayKeys {
		user, day, cost, reqs := make([]int64, len(keys)), make([]int64, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			d := sums.Days[k]
			user[i], day[i], cost[i], reqs[i] = k.User, k.Day, d.Cost, d.Requests
		}
		b.Queue(addDailyRows, user, day, cost, reqs)
	} else {
		for _, k := range keys {
			d := sums.Days[k]
			b.Queue(addDaily, k.User, k.Day, d.Cost, d.Requests)
		}
	}
	if keys := sums.ModelKeys(); len(keys) >= rollupArrayKeys {
		n := len(keys)
		day, user, model := make([]int64, n), make([]int64, n), make([]string, n)
		var c [6][]int64
		for j := range c {
			c[j] = make([]int64, n)
		}
		for i, k := range keys {
			t := sums.Models[k]
			day[i], user[i], model[i] = k.Day, k.User, k.Model
			c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i] = t.Requests, t.PromptTokens,
				t.CompletionTokens, t.CachedTokens, t.ReasoningTokens, t.Cost
		}
		b.Queue(addDailyModelRows, day, user, model, c[0], c[1], c[2], c[3], c[4], c[5])
	} else {
		for _, k := range keys {
			t := sums.Models[k]
			b.Queue(addDailyModel, k.Day, k.User, k.Model, t.Requests, t.PromptTokens,
				t.CompletionTokens, t.CachedTokens, t.ReasoningTokens, t.Cost)
		}
	}
	if keys := sums.TotalKeys(); len(keys) >= rollupArrayKeys {
		n := len(keys)
		grp, day, key := make([]string, n), make([]int64, n), make([]string, n)
		var c [10][]int64
		for j := range c {
			c[j] = make([]int64, n)
		}
		for i, k := range keys {
			t := sums.Totals[k]
			grp[i], day[i], key[i] = string(k.By), k.Day, k.Key()
			c[0][i], c[1][i], c[2][i], c[3][i], c[4][i] = t.Requests, t.Errors, t.Cost, t.Tokens, t.PromptTokens
			c[5][i], c[6][i], c[7][i], c[8][i], c[9][i] = t.CachedTokens, t.LatencyMS, t.TTFBMS, t.CacheHits, t.CacheSaved
		}
		b.Queue(addDailyTotalRows, grp, day, key, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9])
	} else {
		for _, k := range keys {
			t := sums.Totals[k]
			b.Queue(addDailyTotal, string(k.By), k.Day, k.Key(), t.Requests, t.Errors, t.Cost, t.Tokens,
				t.PromptTokens, t.CachedTokens, t.LatencyMS, t.TTFBMS, t.CacheHits, t.CacheSaved)
		}
	}
}

// settleRows writes logs and charges their costs within tx, as SettleBatch
// describes; ids receives each written row's id (0: written before).
//
// Rows are locked in one order by every writer: users by id, then tokens
// by id, then the daily totals by key. Two instances settling batches over
// the same users then wait for each other rather than deadlock.
func settleRows(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time, windows map[string]int64) error {
	clear(ids) // a retried transaction starts over
	if err := insertRows(ctx, tx, logs, ids, ts); err != nil {
		return err
	}

	sums := store.NewBatchCharges(windows)
	for i, l := range logs {
		if ids[i] == 0 {
			continue
		}
		createdAt := l.CreatedAt
		if createdAt.IsZero() {
			createdAt = ts
		}
		sums.Add(l, createdAt)
	}

	b := &pgx.Batch{}
	for _, id := range sums.UserIDs() {
		c := sums.Users[id]
		b.Queue(chargeUser, c.Cost, c.Requests, id)
	}
	for _, id := range sums.TokenIDs() {
		b.Queue(chargeToken, sums.Tokens[id], id)
	}
	queueRollups(b, sums)
	queueWindowSpend(b, sums.Windows)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("charge the batch: %w", err)
	}
	return nil
}

// ListUsage returns usage rows newest first (by created_at, then id), at
// most f.Limit of them (100 when f.Limit is not positive), narrowed by the
// filter's fields. A page continues from f.After by a range condition on the
// (user_id[, model], created_at, id) indexes, never by OFFSET, so its cost
// does not grow with how deep the page is or how big the table is.
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]*store.UsageLog, error) {
	if f.RequestID == "" {
		return s.listUsage(ctx, f, "")
	}
	return store.ByRequestID(func(column string) ([]*store.UsageLog, error) { return s.listUsage(ctx, f, column) })
}

func (s *Store) listUsage(ctx context.Context, f store.UsageFilter, idColumn string) ([]*store.UsageLog, error) {
	if idColumn == "upstream_request_id" {
		return s.listUsageByUpstreamID(ctx, f)
	}
	q, args, err := usageQuery(f, idColumn, -1)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, q, args...)
	return collect(rows, err, store.ScanUsage, "list usage")
}

// listUsageByUpstreamID is listUsage for the upstream request id, in a
// transaction of its own:
//
//   - the part's number is the server's hash of the id, and the statement
//     must name it as a constant for the planner to pick that part's
//     index, so it is asked for first;
//   - the planner costs each day's part at one range of 128 pages, so
//     over all time (90 days: 840,000) it would compile the plan's
//     expressions (JIT, above jit_above_cost: 4.5 s at 50 million rows,
//     for a statement that runs in 8-36 ms) and start parallel workers
//     (each loading every day's indexes: 120-150 ms); neither, for this
//     statement only (SET LOCAL);
//   - the statement is planned for its values every time (an unnamed
//     statement): the cached statement's generic plan, which pgx's
//     prepared statements get after five runs, took created_at >= $n for
//     a third of every day, costed the part's filters above walking each
//     day's created_at index newest first, and chose the walk (2.3-4 s
//     over 5 million rows against 2 ms).
//
// bench/README.md, "PostgreSQL: the upstream request id over all time".
func (s *Store) listUsageByUpstreamID(ctx context.Context, f store.UsageFilter) ([]*store.UsageLog, error) {
	var logs []*store.UsageLog
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		part := -1
		if err := tx.QueryRow(ctx, `SELECT set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
			`+upstreamPartOf, f.RequestID).Scan(nil, nil, &part); err != nil {
			return fmt.Errorf("the upstream request id's part: %w", err)
		}
		q, args, err := usageQuery(f, "upstream_request_id", part)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
		logs, err = collect(rows, err, store.ScanUsage, "list usage")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list usage by upstream request id: %w", err)
	}
	return logs, nil
}

// upstreamParts is how many parts the upstream request id's bloom filters
// are split in by a hash of the id (migration 0030_usage_upstream_bloom_parts):
// part k is a partial BRIN index of the rows whose upstreamPart is k.
const upstreamParts = 16

// upstreamPart is the expression that puts a row in its part, as each
// part's index predicate spells it; upstreamPartOf computes it for an id.
const (
	upstreamPart   = "(hashtext(upstream_request_id) & 15)"
	upstreamPartOf = "hashtext($1) & 15"
)

// usageQuery is listUsage's statement and its arguments; part is the
// upstream request id's part (upstreamPartOf) when idColumn is
// upstream_request_id.
//
// The upstream request id has no b-tree, only a day's BRIN bloom filters
// led by created_at (migrations 0028_usage_upstream_bloom and 0030). The planner
// reckons a BRIN index's selectivity from the best correlation among the
// columns the query names, and a vendor's random id has none: named alone,
// the index looks as dear as reading the day, and a day is read (190-260
// ms for 555,555 rows). So the upstream id always goes with a condition on
// created_at, the filter's own or one that every row meets, whose
// correlation (1: a day is written in time order) lets the planner see
// that the filters leave a range or two (bench/README.md, "PostgreSQL: the
// upstream request id over a day").
//
// The filters are split in upstreamParts partial indexes by a hash of the
// id, and a partial index is used only when the query names its predicate
// with the same constant: the statement says which part the id is in
// (always true of the rows that match it), so each day is read through
// that part's filters, a sixteenth of the day's (bench/README.md,
// "PostgreSQL: the upstream request id over all time"). A day that still
// has 0028's single index is read through it: the condition is then a
// filter that every matching row meets.
func usageQuery(f store.UsageFilter, idColumn string, part int) (string, []any, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	w := store.NewWhere("$")
	if err := store.UsageWhere(f, idColumn, w); err != nil {
		return "", nil, err
	}
	if idColumn == "upstream_request_id" {
		if part < 0 || part >= upstreamParts {
			return "", nil, fmt.Errorf("list usage: upstream request id part %d out of range", part)
		}
		w.Add(upstreamPart + " = " + strconv.Itoa(part))
		if f.Since.IsZero() {
			w.Add("created_at >= " + w.Arg(int64(math.MinInt64)))
		}
	}
	if c := f.After; c != nil {
		w.Add("(created_at, id) < (" + w.Arg(c.CreatedAt.UnixMilli()) + ", " + w.Arg(c.ID) + ")")
	}
	q := `SELECT ` + store.UsageColumns + ` FROM usage_logs` + w.String() +
		` ORDER BY created_at DESC, id DESC LIMIT ` + w.Arg(limit)
	return q, w.Args(), nil
}

// DailySpend reads the per-day totals SettleBatch keeps, so its cost is
// the number of days asked for, not the number of requests made.
func (s *Store) DailySpend(ctx context.Context, userID int64, since time.Time) ([]store.DailySpend, error) {
	rows, err := s.pool.Query(ctx, `SELECT day, cost, requests FROM usage_daily
		WHERE user_id = $1 AND day >= $2 ORDER BY day`, userID, since.UnixMilli()/store.MsPerDay)
	return collect(rows, err, store.ScanDailySpend, "daily spend of user %d", userID)
}

// CountUsage returns how many usage rows exist.
func (s *Store) CountUsage(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM usage_logs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count usage: %w", err)
	}
	return n, nil
}

// UsageSince returns a page of rows created at or after since, in id order.
// Keyset pages keep every read short, however many rows an export streams.
func (s *Store) UsageSince(ctx context.Context, since time.Time, afterID int64, limit int) ([]*store.UsageLog, error) {
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+store.UsageColumns+` FROM usage_logs
		WHERE id > $1 AND created_at >= $2 ORDER BY id LIMIT $3`, afterID, since.UnixMilli(), limit)
	logs, err := collect(rows, err, store.ScanUsage, "usage since")
	if err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		return nil, nil // as the SQLite store answers an exhausted export
	}
	return logs, nil
}

// DeleteUsageBefore deletes one batch of the oldest rows before cutoff,
// chosen through the created_at index, in one statement. The condition on
// created_at in both halves keeps it to the days before cutoff (after
// DropUsageDays, the partly expired one and the default partition).
func (s *Store) DeleteUsageBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, errors.New("delete usage: the batch size must be positive")
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM usage_logs WHERE created_at < $1 AND (created_at, id) IN (
		SELECT created_at, id FROM usage_logs WHERE created_at < $1 ORDER BY created_at LIMIT $2)`,
		cutoff.UnixMilli(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete usage before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}

// DailyUsageByModel returns a user's (or everyone's) daily totals per
// model from since on.
func (s *Store) DailyUsageByModel(ctx context.Context, userID int64, since time.Time) ([]*store.UsageDay, error) {
	q := `SELECT ` + store.UsageDayColumns + ` FROM usage_daily_models WHERE day >= $1`
	args := []any{since.UnixMilli() / store.MsPerDay}
	if userID != 0 {
		q += ` AND user_id = $2`
		args = append(args, userID)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY day, user_id, model`, args...)
	out, err := collect(rows, err, store.ScanUsageDay, "daily usage")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil // no days is nil, not an empty slice
	}
	return out, nil
}

// DailyTotals reads the per-day totals the batches keep: one range of the
// table's key (group, day) whatever the usage log holds.
func (s *Store) DailyTotals(ctx context.Context, by store.UsageGroup, since time.Time, top int) ([]store.UsageTotal, error) {
	if err := store.CheckUsageGroup(by); err != nil {
		return nil, err
	}
	q := `SELECT day, key, requests, errors, cost, tokens, prompt_tokens,
		cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved FROM usage_daily_totals
		WHERE grp = $1 AND day >= $2`
	args := []any{string(by), store.DayOf(since)}
	if top > 0 {
		// the period's sums per key in the database: a few thousand keys'
		// days summed there rather than sent here to be summed
		q += ` AND key IN (SELECT key FROM usage_daily_totals WHERE grp = $1 AND day >= $2
			GROUP BY key ORDER BY SUM(cost) DESC, SUM(requests) DESC, key LIMIT $3)`
		args = append(args, top)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY day, key`, args...)
	return collect(rows, err, store.ScanUsageTotal, "daily totals by %s", by)
}

// Ping checks that the server takes writes right now: a statement that
// writes nothing still fails on a read-only server (a standby, or a
// database set read-only), where the gateway could not record usage.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `UPDATE schema_migrations SET applied_at = applied_at WHERE false`); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
