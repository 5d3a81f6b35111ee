package accountapi

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/spreadsheet"
	"github.com/caddy-model-gateway/gateway/store"
)

// The audit log as the admin API shows it, and the CSV export of codes.

// audit records an administrator's action. The action is done by then,
// so a failed write is logged, not answered: the caller's change stands.
func (h *Handler) audit(ctx context.Context, c *caller, action, target string, before, after account.Fields) {
	if err := account.Audit(ctx, h.store, c.user, action, target, before, after); err != nil {
		h.log.Error("audit log not written", zap.String("action", action), zap.String("target", target),
			zap.String("by", c.user.Username), zap.Error(err))
	}
}

// listAudit answers GET /api/admin/audit: entries newest first, filtered
// by actor, action (exact, or a prefix ending in "."), target, since and
// until (RFC 3339 or unix seconds); limit 1-100 (default 50); before is
// the next_cursor of the page before.
func (h *Handler) listAudit(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	q := r.URL.Query()
	f := store.AuditFilter{Limit: 50, Actor: strings.TrimSpace(q.Get("actor")),
		Action: strings.TrimSpace(q.Get("action")), Target: strings.TrimSpace(q.Get("target"))}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, badRequest("invalid_limit", "limit must be a whole number from 1 to 100, not %q", v)
		}
		f.Limit = n
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := parseTime(v)
			if err != nil {
				return nil, badRequest("invalid_"+name, "%s must be an RFC 3339 time or unix seconds, not %q", name, v)
			}
			*dst = t
		}
	}
	var err error
	if f.BeforeID, err = queryID(r, "before", "the next_cursor of the previous page"); err != nil {
		return nil, err
	}
	entries, err := h.store.ListAudit(r.Context(), f)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(entries) == f.Limit {
		next = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return map[string]any{"data": entries, "next_cursor": next}, nil
}

// maxExported is the most codes one CSV export holds.
const maxExported = 10000

// exportCodes answers GET /api/admin/codes/export (search, name as for
// the listing) with the codes as CSV, newest first, at most maxExported.
func (h *Handler) exportCodes(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	q := r.URL.Query()
	f := store.CodeFilter{Search: strings.TrimSpace(q.Get("search")), Name: strings.TrimSpace(q.Get("name")), Limit: 500}
	var codes []*store.RedemptionCode
	for len(codes) < maxExported {
		page, err := h.store.ListRedemptionCodes(r.Context(), f)
		if err != nil {
			return nil, err
		}
		codes = append(codes, page...)
		if len(page) < f.Limit {
			break
		}
		f.BeforeID = page[len(page)-1].ID
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="redemption-codes.csv"`)
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "name", "code", "quota", "usd", "status", "used_by", "created_at", "redeemed_at", "expires_at", "plan", "plan_days"})
	for _, code := range codes {
		// a batch's name is an administrator's text: a spreadsheet shows it
		// rather than runs it
		_ = cw.Write([]string{strconv.FormatInt(code.ID, 10), spreadsheet.Cell(code.Name), spreadsheet.Cell(code.Code), strconv.FormatInt(code.Quota, 10),
			dollars(code.Quota), code.Status, strconv.FormatInt(code.UsedBy, 10), rfc3339(code.CreatedAt),
			rfc3339(code.RedeemedAt), rfc3339(code.ExpiresAt), spreadsheet.Cell(code.Plan), strconv.FormatInt(code.PlanDays, 10)})
	}
	cw.Flush()
	h.log.Info("codes exported", zap.String("by", c.user.Username), zap.Int("codes", len(codes)))
	return answered{}, cw.Error()
}

// answered is what a handler returns when it wrote its answer itself.
type answered struct{}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
