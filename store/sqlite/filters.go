package sqlite

import (
	"fmt"
	"strconv"
	"strings"

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
func usageSieve(f store.UsageFilter, where []string, args []any) ([]string, []any, error) {
	if f.TokenID != 0 {
		where, args = append(where, "token_id = ?"), append(args, f.TokenID)
	}
	if f.Channel != "" {
		where, args = append(where, "channel = ?"), append(args, f.Channel)
	}
	if f.RequestID != "" {
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
	}
	return where, args, nil
}
