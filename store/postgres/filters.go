package postgres

import (
	"fmt"
	"strconv"
	"strings"

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
func usageSieve(f store.UsageFilter, where *[]string, arg func(any) string) error {
	if f.TokenID != 0 {
		*where = append(*where, "token_id = "+arg(f.TokenID))
	}
	if f.Channel != "" {
		*where = append(*where, "channel = "+arg(f.Channel))
	}
	if f.RequestID != "" {
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
	}
	return nil
}
