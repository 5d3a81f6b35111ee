package engine

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// WindowError is the 429 of a spending window without room: a rate limit
// whose Retry-After says when the window frees enough, except for the
// lifetime budget, which never does: a quota error (x-should-retry:
// false, WriteError).
func WindowError(r *billing.WindowRefusal, header http.Header) *adapters.Error {
	who := windowOwner(r.Subject)
	e := &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "budget_exceeded"}
	if r.Window == billing.Lifetime {
		e.Type = adapters.ErrInsufficientQuota
		e.Message = fmt.Sprintf("the lifetime budget of %s (%s) is used up: %s spent or in flight, and this request may cost up to %s; it never resets: ask the operator to raise it",
			who, FormatUnits(r.Limit), FormatUnits(r.Used), FormatUnits(r.Amount))
		return e
	}
	secs := max(int64((r.RetryAfter+time.Second-1)/time.Second), 1)
	if header != nil {
		header.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	e.Message = fmt.Sprintf("the %s budget of %s (%s) has no room for this request, which may cost up to %s (%s spent or in flight); it frees enough at %s, in %d seconds: try again then, or lower max_tokens",
		windowLabel(r.Window), who, FormatUnits(r.Limit), FormatUnits(r.Amount), FormatUnits(r.Used), r.Reset.UTC().Format(time.RFC3339), secs)
	return e
}

func windowLabel(k billing.WindowKind) string {
	if k == billing.Rolling5h {
		return "rolling 5-hour"
	}
	return k.String()
}

// windowOwner names a window's subject for its user: their key, their
// account, their group or their plan.
func windowOwner(subject string) string {
	kind, rest, _ := cutSubject(subject)
	switch kind {
	case "key":
		return "this API key"
	case "user":
		return "your account"
	case "group":
		return "your group " + rest
	case "plan":
		return "your plan " + rest
	}
	return subject
}

func cutSubject(s string) (kind, name string, ok bool) {
	kind, name, ok = strings.Cut(s, ":")
	name, _, _ = strings.Cut(name, "/")
	return kind, name, ok
}

// BudgetHeaders tell an admitted request's caller the tightest window's
// room after its reservation and when that window resets (RFC 3339; absent
// for a lifetime budget); nothing when no window applies.
func BudgetHeaders(h http.Header, wh *billing.WindowHold) {
	if wh == nil || wh.Remaining < 0 {
		return
	}
	h.Set(billing.HeaderBudgetRemaining, FormatUnits(wh.Remaining))
	if !wh.Reset.IsZero() {
		h.Set(billing.HeaderBudgetReset, wh.Reset.UTC().Format(time.RFC3339))
	}
}
