package postgres

import (
	"context"
	"strconv"

	"github.com/caddy-model-gateway/gateway/store"
)

// UsageTotals sums usage rows per UTC day and per group, in the database.
func (s *Store) UsageTotals(ctx context.Context, f store.UsageFilter, by store.UsageGroup) ([]store.UsageTotal, error) {
	if err := store.CheckUsageGroup(by); err != nil {
		return nil, err
	}
	w := store.NewWhere("$")
	if err := store.UsageWhere(f, "", w); err != nil {
		return nil, err
	}
	q := `SELECT created_at / ` + strconv.Itoa(store.MsPerDay) + ` AS day, ` + string(by) + `::text AS k,
		COUNT(*), SUM(CASE WHEN status < 200 OR status >= 300 THEN 1 ELSE 0 END)::bigint, SUM(cost)::bigint,
		SUM(prompt_tokens + completion_tokens)::bigint, SUM(prompt_tokens)::bigint, SUM(cached_tokens)::bigint, SUM(latency_ms)::bigint, SUM(ttfb_ms)::bigint,
		SUM(CASE WHEN cache_hit THEN 1 ELSE 0 END)::bigint, SUM(cache_saved)::bigint FROM usage_logs`
	rows, err := s.pool.Query(ctx, q+w.String()+` GROUP BY day, k ORDER BY day, k`, w.Args()...)
	return collect(rows, err, store.ScanUsageTotal, "usage totals by %s", by)
}
