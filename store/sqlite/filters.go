package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// likePart is a LIKE pattern (with ESCAPE '\') matching any text that
// holds part: its own % and _ match only themselves.
func likePart(part string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(part) + "%"
}

// usageSieve adds the conditions of f's key, channel, status and request
// id to where. The failed-rows condition is written exactly as the
// partial index usage_logs_failed_created_at states it, so the planner
// uses that index.
// idColumn names the one column the request id is matched in; "" matches
// either (see ListUsage).
func usageSieve(f store.UsageFilter, idColumn string, where []string, args []any) ([]string, []any, error) {
	if f.TokenID != 0 {
		where, args = append(where, "token_id = ?"), append(args, f.TokenID)
	}
	if f.Channel != "" {
		where, args = append(where, "channel = ?"), append(args, f.Channel)
	}
	switch {
	case f.RequestID == "":
	case idColumn != "":
		where, args = append(where, idColumn+" = ?"), append(args, f.RequestID)
	default:
		where, args = append(where, "(request_id = ? OR upstream_request_id = ?)"), append(args, f.RequestID, f.RequestID)
	}
	switch f.Status {
	case "":
	case store.UsageStatusOK:
		where = append(where, "status >= 200", "status < 300")
	case store.UsageStatusError:
		where = append(where, "(status < 200 OR status >= 300)")
	default:
		n, err := strconv.Atoi(f.Status)
		if err != nil {
			return nil, nil, fmt.Errorf("list usage: status must be ok, error or a status code, not %q", f.Status)
		}
		where, args = append(where, "status = ?"), append(args, n)
		if n < 200 || n >= 300 {
			where = append(where, "(status < 200 OR status >= 300)") // the partial index's condition
		}
	}
	return where, args, nil
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
		err   error
	)
	if f.UserID != 0 {
		where, args = append(where, "user_id = ?"), append(args, f.UserID)
	}
	if f.Model != "" {
		where, args = append(where, "model = ?"), append(args, f.Model)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, f.Until.UnixMilli())
	}
	if where, args, err = usageSieve(f, "", where, args); err != nil {
		return nil, err
	}
	q := `SELECT created_at / ` + strconv.Itoa(store.MsPerDay) + ` AS day, CAST(` + string(by) + ` AS TEXT) AS k,
		COUNT(*), SUM(CASE WHEN status < 200 OR status >= 300 THEN 1 ELSE 0 END), SUM(cost),
		SUM(prompt_tokens + completion_tokens), SUM(prompt_tokens), SUM(cached_tokens), SUM(latency_ms), SUM(ttfb_ms) FROM usage_logs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, q+` GROUP BY day, k ORDER BY day, k`, args...)
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
