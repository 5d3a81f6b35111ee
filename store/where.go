package store

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Where is a WHERE clause built a condition at a time, with its arguments
// numbered in the driver's placeholder style (SQLite's ?N, PostgreSQL's
// $N), so that both drivers filter a listing with the same code and a
// value used twice is passed once.
type Where struct {
	conds []string
	args  []any
	mark  string
}

// NewWhere starts a clause whose placeholders are mark followed by the
// argument's number: "?" for SQLite, "$" for PostgreSQL.
func NewWhere(mark string) *Where { return &Where{mark: mark} }

// Arg adds v to the arguments and returns its placeholder.
func (w *Where) Arg(v any) string {
	w.args = append(w.args, v)
	return w.mark + strconv.Itoa(len(w.args))
}

// Add adds conditions, all of which a row must meet.
func (w *Where) Add(conds ...string) { w.conds = append(w.conds, conds...) }

// String is " WHERE " and the conditions, or "" when there are none.
func (w *Where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Created adds created_at >= since and < until, each when it is set.
func (w *Where) Created(since, until time.Time) {
	if !since.IsZero() {
		w.Add("created_at >= " + w.Arg(since.UnixMilli()))
	}
	if !until.IsZero() {
		w.Add("created_at < " + w.Arg(until.UnixMilli()))
	}
}

// Args are the arguments, in their placeholders' order.
func (w *Where) Args() []any { return w.args }

// LikePart is a LIKE pattern (with '\' as its escape, PostgreSQL's
// default and SQLite's with ESCAPE '\') matching any text that holds
// part: its own % and _ match only themselves.
func LikePart(part string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(part) + "%"
}

// UsageWhere adds the conditions of a usage filter's user, model and time
// range, then those of its key, channel, status and request id.
// idColumn names the one column the request id is matched in; "" matches
// either (see ListUsage). The failed-rows condition is written exactly as
// the partial index usage_logs_failed_created_at states it, so the
// planner uses that index.
func UsageWhere(f UsageFilter, idColumn string, w *Where) error {
	if f.UserID != 0 {
		w.Add("user_id = " + w.Arg(f.UserID))
	}
	if f.Model != "" {
		w.Add("model = " + w.Arg(f.Model))
	}
	w.Created(f.Since, f.Until)
	if f.TokenID != 0 {
		w.Add("token_id = " + w.Arg(f.TokenID))
	}
	if f.Channel != "" {
		w.Add("channel = " + w.Arg(f.Channel))
	}
	switch {
	case f.RequestID == "":
	case idColumn != "":
		w.Add(idColumn + " = " + w.Arg(f.RequestID))
	default:
		n := w.Arg(f.RequestID)
		w.Add("(request_id = " + n + " OR upstream_request_id = " + n + ")")
	}
	switch f.Status {
	case "":
	case UsageStatusOK:
		w.Add("status >= 200", "status < 300")
	case UsageStatusError:
		w.Add("(status < 200 OR status >= 300)")
	default:
		n, err := strconv.Atoi(f.Status)
		if err != nil {
			return fmt.Errorf("list usage: status must be ok, error or a status code, not %q", f.Status)
		}
		w.Add("status = " + w.Arg(n))
		if n < 200 || n >= 300 {
			w.Add("(status < 200 OR status >= 300)") // the partial index's condition
		}
	}
	return nil
}

// AuditWhere adds the conditions of an audit filter: entries before
// f.BeforeID (all when it is not positive), by actor, action, target and
// time. An action ending in "." names a family ("user." is every user.*
// action); actionPrefix writes the condition for the family named
// (without its dot) in the driver's SQL, which must compare bytes, not
// follow a collation.
func AuditWhere(f AuditFilter, w *Where, actionPrefix func(w *Where, prefix string) string) {
	before := f.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	w.Add("id < " + w.Arg(before))
	if f.Actor != "" {
		w.Add("actor = " + w.Arg(f.Actor))
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok && prefix != "" {
		w.Add(actionPrefix(w, prefix))
	} else if f.Action != "" {
		w.Add("action = " + w.Arg(f.Action))
	}
	if f.Target != "" {
		w.Add("target = " + w.Arg(f.Target))
	}
	w.Created(f.Since, f.Until)
}

// CheckUsageGroup refuses a UsageTotals group that is not a column.
func CheckUsageGroup(by UsageGroup) error {
	switch by {
	case ByChannel, ByModel, ByUser, ByToken:
		return nil
	}
	return fmt.Errorf("usage totals: unknown group %q", by)
}
