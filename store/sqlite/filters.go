package sqlite

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// UsageTotals sums usage rows per UTC day and per group, in the database:
// each table's sums, added up where two tables hold rows of the same day
// (usage_logs and a day table).
func (s *Store) UsageTotals(ctx context.Context, f store.UsageFilter, by store.UsageGroup) ([]store.UsageTotal, error) {
	if err := store.CheckUsageGroup(by); err != nil {
		return nil, err
	}
	w := store.NewWhere("?")
	if err := store.UsageWhere(f, "", w); err != nil {
		return nil, err
	}
	segs, err := s.usageSegments(ctx)
	if err != nil {
		return nil, err
	}
	type dayKey struct {
		day time.Time
		key string
	}
	sums := map[dayKey]*store.UsageTotal{}
	err = eachSegment(inRange(segs, f.Since, f.Until), func(g usageSegment) error {
		q := `SELECT created_at / ` + strconv.Itoa(store.MsPerDay) + ` AS day, CAST(` + string(by) + ` AS TEXT) AS k,
			COUNT(*), SUM(CASE WHEN status < 200 OR status >= 300 THEN 1 ELSE 0 END), SUM(cost),
			SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms), SUM(ttfb_ms),
			SUM(cache_hit), SUM(cache_saved) FROM ` + g.table
		rows, err := s.r.QueryContext(ctx, q+w.String()+` GROUP BY day, k`, w.Args()...)
		got, err := collect(rows, err, store.ScanUsageTotal, "usage totals by %s", by)
		for _, t := range got {
			k := dayKey{t.Day, t.Key}
			if sum := sums[k]; sum != nil {
				sum.Requests += t.Requests
				sum.Errors += t.Errors
				sum.Cost += t.Cost
				sum.Tokens += t.Tokens
				sum.PromptTokens += t.PromptTokens
				sum.CachedTokens += t.CachedTokens
				sum.LatencyMS += t.LatencyMS
				sum.TTFBMS += t.TTFBMS
				sum.CacheHits += t.CacheHits
				sum.CacheSaved += t.CacheSaved
			} else {
				sums[k] = &t
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.UsageTotal, 0, len(sums))
	for _, t := range sums {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b store.UsageTotal) int {
		if c := a.Day.Compare(b.Day); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
