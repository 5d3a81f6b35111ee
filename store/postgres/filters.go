package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// likePart is an ILIKE pattern matching any text that holds part: its own
// % and _ match only themselves (backslash is PostgreSQL's LIKE escape).
func likePart(part string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(part) + "%"
}

// usageSieve adds the conditions of f's key, channel, status and request
// id to where, arg numbering the parameters. The failed-rows condition is
// written exactly as the partial index usage_logs_failed_created_at
// states it, so the planner can use that index.
// idColumn names the one column the request id is matched in; "" matches
// either (see ListUsage).
func usageSieve(f store.UsageFilter, idColumn string, where *[]string, arg func(any) string) error {
	if f.TokenID != 0 {
		*where = append(*where, "token_id = "+arg(f.TokenID))
	}
	if f.Channel != "" {
		*where = append(*where, "channel = "+arg(f.Channel))
	}
	switch {
	case f.RequestID == "":
	case idColumn != "":
		*where = append(*where, idColumn+" = "+arg(f.RequestID))
	default:
		n := arg(f.RequestID)
		*where = append(*where, "(request_id = "+n+" OR upstream_request_id = "+n+")")
	}
	switch f.Status {
	case "":
	case store.UsageStatusOK:
		*where = append(*where, "status >= 200", "status < 300")
	case store.UsageStatusError:
		*where = append(*where, "(status < 200 OR status >= 300)")
	default:
		n, err := strconv.Atoi(f.Status)
		if err != nil {
			return fmt.Errorf("list usage: status must be ok, error or a status code, not %q", f.Status)
		}
		*where = append(*where, "status = "+arg(n))
		if n < 200 || n >= 300 {
			*where = append(*where, "(status < 200 OR status >= 300)") // the partial index's condition
		}
	}
	return nil
}

// UsageTotals sums usage rows per UTC day and per group, in the database.
func (s *Store) UsageTotals(ctx context.Context, f store.UsageFilter, by store.UsageGroup) ([]store.UsageTotal, error) {
	switch by {
	case store.ByChannel, store.ByModel, store.ByUser, store.ByToken:
	default:
		return nil, fmt.Errorf("usage totals: unknown group %q", by)
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.UserID != 0 {
		where = append(where, "user_id = "+arg(f.UserID))
	}
	if f.Model != "" {
		where = append(where, "model = "+arg(f.Model))
	}
	if !f.Since.IsZero() {
		where = append(where, "created_at >= "+arg(f.Since.UnixMilli()))
	}
	if !f.Until.IsZero() {
		where = append(where, "created_at < "+arg(f.Until.UnixMilli()))
	}
	if err := usageSieve(f, "", &where, arg); err != nil {
		return nil, err
	}
	q := `SELECT created_at / ` + strconv.Itoa(store.MsPerDay) + ` AS day, ` + string(by) + `::text AS k,
		COUNT(*), SUM(CASE WHEN status < 200 OR status >= 300 THEN 1 ELSE 0 END)::bigint, SUM(cost)::bigint,
		SUM(prompt_tokens + completion_tokens)::bigint, SUM(prompt_tokens)::bigint, SUM(cached_tokens)::bigint, SUM(latency_ms)::bigint, SUM(ttfb_ms)::bigint FROM usage_logs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.pool.Query(ctx, q+` GROUP BY day, k ORDER BY day, k`, args...)
	if err != nil {
		return nil, fmt.Errorf("usage totals by %s: %w", by, err)
	}
	defer rows.Close()
	out := []store.UsageTotal{}
	for rows.Next() {
		var t store.UsageTotal
		var day int64
		if err := rows.Scan(&day, &t.Key, &t.Requests, &t.Errors, &t.Cost, &t.Tokens, &t.PromptTokens, &t.CachedTokens, &t.LatencyMS, &t.TTFBMS); err != nil {
			return nil, fmt.Errorf("usage totals by %s: %w", by, err)
		}
		t.Day = time.UnixMilli(day * store.MsPerDay).UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage totals by %s: %w", by, err)
	}
	return out, nil
}
