package postgres

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// LoadUsageDay is the bulk load of a whole UTC day of usage rows, for
// bench/usagegen's data sets (issue 34: 50 million rows by SettleBatch
// take over an hour): the rows go by COPY into the day's table made
// apart, without indexes, its rollups and charges are summed from it by
// INSERT ... SELECT ... GROUP BY, and ATTACH PARTITION then builds the
// day's indexes once, as a restore does, while the day is still in the
// cache. What it writes equals what SettleBatch writes for the same rows
// (TestLoadUsageDayEqualsSettleBatch): ids from the table's sequence in
// the rows' order, usage_daily, usage_daily_models, usage_daily_totals,
// the users' balances and request counts and the keys' used quota.
//
// It is for an offline database only: it assumes the day's rows are new
// (no row key check) and nothing else writes meanwhile, and refuses a
// plan's or a windowed row (their charges are not summed here). A day whose partition exists already (today,
// made by Open) gets its rows by COPY through its indexes.
func (s *Store) LoadUsageDay(ctx context.Context, day int64, rows iter.Seq[*store.UsageLog]) (int64, error) {
	part := dayPartition(day)
	name := pgx.Identifier{part}.Sanitize()
	from, to := day*store.MsPerDay, (day+1)*store.MsPerDay
	var n int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, part).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (LIKE usage_logs INCLUDING DEFAULTS,
				CHECK (created_at >= %d AND created_at < %d))`, name, from, to)); err != nil {
				return err
			}
		}
		var next int64 // the first id of the day's rows
		if err := tx.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('usage_logs', 'id'))`).Scan(&next); err != nil {
			return err
		}
		src := &usageCopy{id: next, from: from, to: to}
		var stop func()
		src.next, stop = iter.Pull(rows)
		defer stop()
		copied, err := tx.CopyFrom(ctx, pgx.Identifier{part}, loadColumns, src)
		if err != nil {
			return err
		}
		if src.err != nil {
			return src.err
		}
		n = copied
		if n > 1 {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('usage_logs', 'id'), $1)`, next+n-1); err != nil {
				return err
			}
		}
		for _, q := range loadRollups {
			if _, err := tx.Exec(ctx, fmt.Sprintf(q, name)); err != nil {
				return fmt.Errorf("rollups: %w", err)
			}
		}
		// the day's statistics now, as after a restore: autovacuum comes to
		// a loaded day late, and until then the planner takes it for an
		// unknown table and may pick a newest-first scan of every day for
		// a request id (seen at 50 million rows: 2.6 s instead of ms)
		if _, err := tx.Exec(ctx, `ANALYZE `+name); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE usage_logs ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`,
				name, from, to)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load usage day %s: %w", part, err)
	}
	return n, nil
}

var loadColumns = []string{"id", "created_at", "user_id", "token_id",
	"model", "channel", "endpoint", "prompt_tokens", "completion_tokens", "cached_tokens",
	"reasoning_tokens", "cost", "status", "estimated", "stream", "latency_ms", "ttfb_ms", "error",
	"request_id", "upstream_request_id", "row_key", "trace_id", "windows", "plan", "cache_hit",
	"cache_saved", "price_tier"}

// usageCopy feeds CopyFrom one row at a time, numbering them.
type usageCopy struct {
	next     func() (*store.UsageLog, bool)
	id       int64
	from, to int64
	row      []any
	err      error
}

func (c *usageCopy) Next() bool {
	l, ok := c.next()
	if !ok {
		return false
	}
	ms := l.CreatedAt.UnixMilli()
	if l.CreatedAt.IsZero() || ms < c.from || ms >= c.to {
		c.err = fmt.Errorf("row %q at %s is not of the day", l.Key, l.CreatedAt)
		return false
	}
	if l.Plan != "" || l.Windows != "" {
		c.err = fmt.Errorf("row %q: a plan's or windowed row cannot be bulk loaded", l.Key)
		return false
	}
	c.row = append(c.row[:0], c.id, ms, l.UserID, l.TokenID, l.Model, l.Channel, l.Endpoint,
		l.PromptTokens, l.CompletionTokens, l.CachedTokens, l.ReasoningTokens, l.Cost, int32(l.Status),
		l.Estimated, l.Stream, l.LatencyMS, l.TTFBMS, l.Error, l.RequestID, l.UpstreamRequestID,
		nullString(l.Key), l.TraceID, l.Windows, l.Plan, l.CacheHit, l.CacheSaved, l.PriceTier)
	c.id++
	return true
}

func (c *usageCopy) Values() ([]any, error) { return c.row, nil }
func (c *usageCopy) Err() error             { return c.err }

// sumSat is SUM saturating at the int64 bounds, as the batches' sums do.
func sumSat(col string) string {
	return "GREATEST(LEAST(SUM(" + col + "), " + maxInt64 + "), " + minInt64 + ")::bigint"
}

// loadRollups sum a loaded day's table (the %s) into the rollups, the
// users and the keys, adding to what is there as SettleBatch's upserts do.
var loadRollups = []string{
	`INSERT INTO usage_daily (user_id, day, cost, requests)
		SELECT user_id, created_at / 86400000, ` + sumSat("cost") + `, COUNT(*) FROM %s
		WHERE user_id <> 0 GROUP BY 1, 2
		ON CONFLICT (user_id, day) DO UPDATE SET
		cost = ` + addSat("usage_daily.cost", "excluded.cost") + `,
		requests = usage_daily.requests + excluded.requests`,
	`INSERT INTO usage_daily_models (day, user_id, model, requests,
		prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost)
		SELECT created_at / 86400000, user_id, model, COUNT(*), ` + sumSat("prompt_tokens") + `,
		` + sumSat("completion_tokens") + `, ` + sumSat("cached_tokens") + `, ` + sumSat("reasoning_tokens") + `,
		` + sumSat("cost") + ` FROM %s GROUP BY 1, 2, 3` + addDailyModel[strings.Index(addDailyModel, "\n\t\tON CONFLICT"):],
	loadTotals("'channel'", "channel"),
	loadTotals("'model'", "model"),
	loadTotals("'user_id'", "user_id::text"),
	loadTotals("'token_id'", "token_id::text"),
	`UPDATE users u SET quota = ` + subSat("u.quota", "c.cost") + `,
		used_quota = ` + addSat("u.used_quota", "c.cost") + `,
		request_count = u.request_count + c.requests
		FROM (SELECT user_id, ` + sumSat("cost") + ` AS cost, COUNT(*) AS requests FROM %s
			WHERE user_id <> 0 GROUP BY 1) c WHERE u.id = c.user_id`,
	`UPDATE tokens t SET used_quota = ` + addSat("t.used_quota", "c.cost") + `
		FROM (SELECT token_id, ` + sumSat("cost") + ` AS cost FROM %s
			WHERE token_id <> 0 GROUP BY 1) c WHERE t.id = c.token_id AND c.cost <> 0`,
}

func loadTotals(grp, key string) string {
	return `INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens,
		prompt_tokens, cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
		SELECT ` + grp + `, created_at / 86400000, ` + key + `, COUNT(*),
		COUNT(*) FILTER (WHERE status < 200 OR status >= 300), ` + sumSat("cost") + `,
		` + sumSat("LEAST(prompt_tokens::numeric + completion_tokens, "+maxInt64+")") + `, ` + sumSat("prompt_tokens") + `,
		` + sumSat("cached_tokens") + `, ` + sumSat("latency_ms") + `, ` + sumSat("ttfb_ms") + `,
		COUNT(*) FILTER (WHERE cache_hit), ` + sumSat("cache_saved") + ` FROM %s GROUP BY 2, 3` +
		addDailyTotal[strings.Index(addDailyTotal, "\n\t\tON CONFLICT"):]
}
