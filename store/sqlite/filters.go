package sqlite

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
	w := store.NewWhere("?")
	if err := store.UsageWhere(f, "", w); err != nil {
		return nil, err
	}
	q := `SELECT created_at / ` + strconv.Itoa(store.MsPerDay) + ` AS day, CAST(` + string(by) + ` AS TEXT) AS k,
		COUNT(*), SUM(CASE WHEN status < 200 OR status >= 300 THEN 1 ELSE 0 END), SUM(cost),
		SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms), SUM(ttfb_ms),
		SUM(cache_hit), SUM(cache_saved) FROM usage_logs`
	rows, err := s.r.QueryContext(ctx, q+w.String()+` GROUP BY day, k ORDER BY day, k`, w.Args()...)
	return collect(rows, err, store.ScanUsageTotal, "usage totals by %s", by)
}
