package accountapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

func (h *Handler) listUsers(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	q := r.URL.Query()
	f := store.UserFilter{Limit: 50, Search: strings.TrimSpace(q.Get("search")),
		Plan: strings.TrimSpace(q.Get("plan")), Group: strings.TrimSpace(q.Get("group"))}
	var err error
	if f.AfterID, err = queryID(r, "after", "a user id"); err != nil {
		return nil, err
	}
	users, err := h.store.ListUsers(r.Context(), f)
	if err != nil {
		return nil, err
	}
	// each with the plan and budget group the users list shows, read at once
	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	budgets, err := h.store.UserBudgetsOf(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	out := make([]adminUserView, len(users))
	for i, u := range users {
		out[i] = adminView(u, budgets[u.ID])
	}
	next := ""
	if len(users) == f.Limit {
		next = strconv.FormatInt(users[len(users)-1].ID, 10)
	}
	return map[string]any{"data": out, "next_cursor": next}, nil
}

func (h *Handler) createUser(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Role     string `json:"role"`
		Quota    int64  `json:"quota"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	u, err := account.CreateUser(r.Context(), h.store, c.user, account.NewUser{Username: in.Username, Password: in.Password, Role: in.Role, Quota: in.Quota})
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditUserCreate, account.UserTarget(u.ID), nil, account.AuditUser(u))
	return account.ViewUser(u), nil
}

func (h *Handler) updateUser(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Status     *string               `json:"status"`
		Role       *string               `json:"role"`
		QuotaDelta *int64                `json:"quota_delta"`
		Limits     *account.LimitsChange `json:"limits"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	before, err := h.store.UserByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	u, err := account.UpdateUser(r.Context(), h.store, c.user, id,
		account.UserChange{Status: in.Status, Role: in.Role, QuotaDelta: in.QuotaDelta, Limits: in.Limits})
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditUserUpdate, account.UserTarget(id), account.AuditUser(before), account.AuditUser(u))
	if in.QuotaDelta != nil && *in.QuotaDelta != 0 {
		h.ledger.Credit(id, *in.QuotaDelta)
	}
	if in.Limits != nil {
		// the user's keys carry the user's limits: admit on the new ones now
		h.keys.ForgetUser(id)
	}
	return account.ViewUser(u), nil
}

// updateTokenLimits changes any user's key: PATCH /api/admin/tokens/{id}
// with {"limits":{"rpm":N,"tpm":N,"max_parallel":N}} and any of the
// fields a user changes on their own keys (name, status, quota_limit,
// models, expires_at), as the console's user page sends them.
func (h *Handler) updateTokenLimits(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Limits *account.LimitsChange `json:"limits"`
		tokenInput
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	other := in.Name != nil || in.QuotaLimit != nil || in.Models != nil || in.ExpiresAt != nil || in.Status != nil
	if in.Limits == nil && !other {
		return nil, badRequest("invalid_request", `send {"limits":{"rpm":N,"tpm":N,"max_parallel":N}} (0 clears one) or any of name, status, quota_limit, models, expires_at`)
	}
	if in.Management != nil {
		return nil, badRequest("invalid_request", "whether a key is a management key is set when it is made")
	}
	old, err := h.store.TokenByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	want := account.SpecOf(old)
	if err := in.apply(&want); err != nil {
		return nil, err
	}
	if in.Models != nil && !slices.Equal(*in.Models, old.Models) {
		if err := h.checkModels(*in.Models); err != nil {
			return nil, err
		}
	}
	if c.token != nil {
		// an administrator's management key lifts no key's limits above
		// its own (its own included), and makes no key wider than itself
		if in.Limits != nil {
			if want.Limits, err = in.Limits.Apply(old.Limits); err != nil {
				return nil, err
			}
		}
		bound := &store.Token{Limits: c.token.Limits, Management: true}
		if other {
			bound = c.token
		}
		if err := account.KeyWithin(bound, want, old.UsedQuota); err != nil {
			return nil, err
		}
	}
	t := old
	if other {
		status := old.Status
		if in.Status != nil {
			status = *in.Status
		}
		if _, t, err = account.AdminUpdateToken(r.Context(), h.store, c.user, id, want, status); err != nil {
			return nil, err
		}
	}
	if in.Limits != nil {
		if t, err = account.SetKeyLimits(r.Context(), h.store, c.user, id, *in.Limits); err != nil {
			return nil, err
		}
	}
	h.audit(r.Context(), c, account.AuditKeyUpdate, account.KeyTarget(id), account.AuditKey(old), account.AuditKey(t))
	h.keys.Forget(t.KeyHash)
	return account.ViewToken(t), nil
}

func (h *Handler) listCodes(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	q := r.URL.Query()
	f := store.CodeFilter{Limit: 50, Search: strings.TrimSpace(q.Get("search")), Name: strings.TrimSpace(q.Get("name"))}
	var err error
	if f.BeforeID, err = queryID(r, "before", "a code id"); err != nil {
		return nil, err
	}
	codes, err := h.store.ListRedemptionCodes(r.Context(), f)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(codes) == f.Limit {
		next = strconv.FormatInt(codes[len(codes)-1].ID, 10)
	}
	return map[string]any{"data": account.ViewCodes(codes), "next_cursor": next}, nil
}

func (h *Handler) createCodes(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Name      string `json:"name"`
		Count     int    `json:"count"`
		Quota     int64  `json:"quota"`
		ExpiresAt string `json:"expires_at"`
		// Plan and PlanDays make plan codes: each grants the plan for the
		// days instead of quota
		Plan     string `json:"plan"`
		PlanDays int64  `json:"plan_days"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Count == 0 {
		in.Count = 1
	}
	var expires time.Time
	if in.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err != nil {
			return nil, badRequest("invalid_expires_at", "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		expires = t
	}
	var codes []*store.RedemptionCode
	var err error
	if in.Plan != "" || in.PlanDays != 0 {
		if in.Quota != 0 {
			return nil, badRequest("invalid_request", "a code grants quota or a plan, not both: send quota, or plan and plan_days")
		}
		if !h.knownBudget("plan", in.Plan) {
			return nil, badRequest("unknown_plan", "no plan named %q is configured: pick one of GET /api/admin/plans", in.Plan)
		}
		codes, err = account.CreatePlanCodes(r.Context(), h.store, in.Name, in.Count, in.Plan, in.PlanDays, expires)
	} else {
		codes, err = account.CreateCodeBatch(r.Context(), h.store, in.Name, in.Count, in.Quota, expires)
	}
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditCodeCreate, account.BatchTarget(codes), nil, account.AuditBatch(codes))
	return map[string]any{"data": account.ViewCodes(codes)}, nil
}

func (h *Handler) updateCode(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Status string `json:"status"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if !slices.Contains([]string{store.CodeEnabled, store.CodeDisabled}, in.Status) {
		return nil, badRequest("invalid_status", "status must be enabled or disabled, not %q", in.Status)
	}
	if err := h.store.SetRedemptionCodeStatus(r.Context(), id, in.Status); err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditCodeUpdate, account.CodeTarget(id), nil, account.Fields{"status": in.Status})
	return map[string]any{"id": id, "status": in.Status}, nil
}

func (h *Handler) adminUsage(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	var f store.UsageFilter
	if err := usageQuery(r, &f); err != nil {
		return nil, err
	}
	if v := r.URL.Query().Get("user_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, badRequest("invalid_user_id", "user_id must be a user's id, not %q", v)
		}
		f.UserID = n
	}
	if err := usageSieveQuery(r, &f); err != nil {
		return nil, err
	}
	return h.listUsage(r, f)
}

// usageQuery reads the usage filter from the query string:
// limit (1-100, default 20), model (exact), since and until (RFC 3339 or
// unix seconds), after (the next_cursor of the page before).
// model_contains, read by listUsage, is a part of a model's name in any
// case.
func usageQuery(r *http.Request, f *store.UsageFilter) error {
	q := r.URL.Query()
	f.Limit = 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("invalid_limit", "limit must be a whole number from 1 to 100, not %q", v)
		}
		f.Limit = n
	}
	f.Model = q.Get("model")
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := parseTime(v)
		if err != nil {
			return badRequest("invalid_"+name, "%s must be an RFC 3339 time or unix seconds, not %q", name, v)
		}
		*dst = t
	}
	if v := q.Get("after"); v != "" {
		ms, id, ok := strings.Cut(v, "_")
		msN, err1 := strconv.ParseInt(ms, 10, 64)
		idN, err2 := strconv.ParseInt(id, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return badRequest("invalid_cursor", "after must be the next_cursor of the previous page, as it was given")
		}
		f.After = &store.UsageCursor{CreatedAt: time.UnixMilli(msN), ID: idN}
	}
	return nil
}

func parseTime(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Parse(time.RFC3339, v)
}

func (h *Handler) listUsage(r *http.Request, f store.UsageFilter) (any, error) {
	logs, err := h.usageRows(r.Context(), f, strings.TrimSpace(r.URL.Query().Get("model_contains")))
	if err != nil {
		return nil, err
	}
	next := ""
	if len(logs) == f.Limit {
		last := logs[len(logs)-1]
		next = fmt.Sprintf("%d_%d", last.CreatedAt.UnixMilli(), last.ID)
	}
	return map[string]any{"data": logs, "next_cursor": next}, nil
}

// usageRows lists a page of usage; with part, of the models whose name
// holds part in any case. The store filters by one exact model, so each
// such model is listed from the same cursor and the lists merged: the
// newest f.Limit rows of their union are the page, exactly as one query
// over all of them would give.
func (h *Handler) usageRows(ctx context.Context, f store.UsageFilter, part string) ([]*store.UsageLog, error) {
	if part == "" {
		return h.store.ListUsage(ctx, f)
	}
	if f.Model != "" {
		return nil, badRequest("invalid_request", "send model (an exact name) or model_contains (a part of names), not both")
	}
	models, err := h.modelsContaining(ctx, f.UserID, f.Since, part)
	if err != nil {
		return nil, err
	}
	rows := []*store.UsageLog{} // a listing of no rows is [], never null
	for _, m := range models {
		g := f
		g.Model = m
		more, err := h.store.ListUsage(ctx, g)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	// the store's order: newest first, the higher id first within a millisecond
	slices.SortFunc(rows, func(a, b *store.UsageLog) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
	}
	return rows, nil
}

// modelsContaining names the models whose name holds part in any case,
// among those served and those in userID's usage (everyone's for 0) since
// the day of since: a model since removed from the configuration still
// has rows.
func (h *Handler) modelsContaining(ctx context.Context, userID int64, since time.Time, part string) ([]string, error) {
	if !since.IsZero() {
		since = since.UTC().Truncate(24 * time.Hour)
	}
	var names []string
	for _, m := range h.served() {
		names = append(names, m.ID)
	}
	if userID == 0 {
		// every user's: the daily totals by model, a row a model a day,
		// rather than a row a user, model and day
		days, err := h.store.DailyTotals(ctx, store.ByModel, since, 0)
		if err != nil {
			return nil, fmt.Errorf("finding the models used: %w", err)
		}
		for _, d := range days {
			names = append(names, d.Key)
		}
	} else {
		days, err := h.store.DailyUsageByModel(ctx, userID, since)
		if err != nil {
			return nil, fmt.Errorf("finding the models used: %w", err)
		}
		for _, d := range days {
			names = append(names, d.Model)
		}
	}
	part = strings.ToLower(part)
	var out []string
	for _, n := range names {
		if strings.Contains(strings.ToLower(n), part) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
