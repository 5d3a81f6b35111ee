package accountapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// The console's page about one user (/console/user): everything an
// administrator sees and changes of them in one place, and the plans a
// picker offers. A user's invitations are theirs to read.

func (h *Handler) userPageRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /api/admin/users/{id}", h.admin(h.userPage))
	m.HandleFunc("GET /api/admin/users/{id}/balance", h.admin(h.balanceHistory))
	m.HandleFunc("DELETE /api/admin/users/{id}/sessions", h.admin(h.endSessions))
	m.HandleFunc("DELETE /api/admin/users/{id}/sessions/{sid}", h.admin(h.endSessions))
	m.HandleFunc("GET /api/admin/plans", h.admin(h.listPlans))
	m.HandleFunc("GET /api/user/invitations", h.user(h.invitations))
}

// adminUserView is a user in the users list: the user with their plan and
// budget group.
type adminUserView struct {
	account.UserView
	Group     string     `json:"group,omitempty"`
	Plan      string     `json:"plan,omitempty"`
	PlanUntil *time.Time `json:"plan_until,omitempty"`
}

func (h *Handler) adminUser(r *http.Request, u *store.User) (adminUserView, error) {
	b, err := h.store.UserBudget(r.Context(), u.ID)
	if err != nil {
		return adminUserView{}, err
	}
	return adminView(u, b), nil
}

func adminView(u *store.User, b store.UserBudget) adminUserView {
	v := adminUserView{UserView: account.ViewUser(u), Group: b.Group, Plan: b.Plan}
	if !b.PlanUntil.IsZero() {
		until := b.PlanUntil.UTC()
		v.PlanUntil = &until
	}
	return v
}

// tokenWithWindows is a key on the user page: the key and its own
// spending windows (USD by window name, as PUT .../budget takes them).
type tokenWithWindows struct {
	account.TokenView
	Windows map[string]int64 `json:"windows"`
}

type sessionView struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// userPage answers GET /api/admin/users/{id}: the user with plan and
// group, their own windows, the windows that apply with their spend, keys
// with theirs, live sessions, invitees, and whether the caller may change
// them (administrators change users; root, administrators).
func (h *Handler) userPage(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	u, err := h.store.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	uv, err := h.adminUser(r, u)
	if err != nil {
		return nil, err
	}
	tokens, err := h.store.ListTokens(ctx, id)
	if err != nil {
		return nil, err
	}
	subjects := []string{account.UserTarget(id)}
	for _, t := range tokens {
		subjects = append(subjects, account.KeyTarget(t.ID))
	}
	limits, err := h.store.Budgets(ctx, subjects)
	if err != nil {
		return nil, err
	}
	keys := make([]tokenWithWindows, len(tokens))
	for i, t := range tokens {
		keys[i] = tokenWithWindows{TokenView: account.ViewToken(t), Windows: windowsOrEmpty(limits[account.KeyTarget(t.ID)])}
	}
	sessions, err := h.store.ListUserSessions(ctx, id)
	if err != nil {
		return nil, err
	}
	sv := make([]sessionView, len(sessions))
	for i, s := range sessions {
		sv[i] = sessionView{ID: account.SessionID(s), CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt}
	}
	invitees, err := h.store.ListInvitees(ctx, id, 100)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"user": uv, "windows": windowsOrEmpty(limits[account.UserTarget(id)]), "tokens": keys,
		"sessions": sv, "invitees": invitees, "manage": account.MayManage(c.user, u) == nil && u.ID != c.user.ID}
	if h.budgets != nil {
		b, err := account.ViewBudget(ctx, h.budgets, h.store, u, nil)
		if err != nil {
			return nil, err
		}
		out["budget"] = b
	}
	return out, nil
}

func windowsOrEmpty(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// balanceEntry is one line of a user's balance history: a credit by an
// administrator, a code redeemed, or a day's spend (amount in units,
// negative for spend).
type balanceEntry struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"` // credit, code, plan_code, payment, refund, dispute, spend
	Amount int64     `json:"amount"`
	Actor  string    `json:"actor,omitempty"`
	// Plan and PlanDays: what a plan code granted
	Plan     string `json:"plan,omitempty"`
	PlanDays int64  `json:"plan_days,omitempty"`
	// Requests: a day's spend's requests
	Requests int64 `json:"requests,omitempty"`
}

// paymentKinds are the balance history's kinds of the payments' audit
// actions.
var paymentKinds = map[string]string{
	store.AuditPaymentPaid:     "payment",
	store.AuditPaymentRefunded: "refund",
	store.AuditPaymentDisputed: "dispute",
}

// balanceHistory answers GET /api/admin/users/{id}/balance: what came
// into and went out of the balance over the last days (default 30, at
// most 366), newest first. Credits come from the audit log (an
// administrator's change of the quota, a payment's events), codes from the codes the user
// redeemed, spend from the per-day totals, so it costs three indexed
// reads whatever the usage log holds.
func (h *Handler) balanceHistory(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 366 {
			return nil, badRequest("invalid_days", "days must be a whole number from 1 to 366, not %q", v)
		}
		days = n
	}
	ctx := r.Context()
	if _, err := h.store.UserByID(ctx, id); err != nil {
		return nil, err
	}
	since := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -(days - 1))
	out := []balanceEntry{}
	audit, err := h.store.ListAudit(ctx, store.AuditFilter{Target: account.UserTarget(id), Since: since, Limit: 100})
	if err != nil {
		return nil, err
	}
	for _, e := range audit {
		// a payment's paid, refunded or disputed event says what it moved
		if kind, ok := paymentKinds[e.Action]; ok {
			var after struct {
				Delta int64 `json:"quota_delta"`
			}
			if json.Unmarshal(e.After, &after) == nil && after.Delta != 0 {
				out = append(out, balanceEntry{At: e.CreatedAt, Kind: kind, Amount: after.Delta, Actor: e.Actor})
			}
			continue
		}
		if e.Action != account.AuditUserUpdate && e.Action != account.AuditUserCreate {
			continue
		}
		var before, after struct {
			Quota *int64 `json:"quota"`
		}
		_ = json.Unmarshal(e.Before, &before)
		_ = json.Unmarshal(e.After, &after)
		if after.Quota == nil {
			continue
		}
		delta := *after.Quota
		if before.Quota != nil {
			delta -= *before.Quota
		}
		if delta != 0 {
			out = append(out, balanceEntry{At: e.CreatedAt, Kind: "credit", Amount: delta, Actor: e.Actor})
		}
	}
	codes, err := h.store.ListRedemptionCodes(ctx, store.CodeFilter{UsedBy: id, Limit: 100})
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		if c.RedeemedAt.Before(since) {
			continue
		}
		e := balanceEntry{At: c.RedeemedAt, Kind: "code", Amount: c.Quota}
		if c.Plan != "" {
			e.Kind, e.Plan, e.PlanDays = "plan_code", c.Plan, c.PlanDays
		}
		out = append(out, e)
	}
	spend, err := h.store.DailySpend(ctx, id, since)
	if err != nil {
		return nil, err
	}
	for _, d := range spend {
		if d.Cost != 0 || d.Requests != 0 {
			out = append(out, balanceEntry{At: d.Day, Kind: "spend", Amount: -d.Cost, Requests: d.Requests})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return map[string]any{"data": out, "since": since}, nil
}

// endSessions answers DELETE /api/admin/users/{id}/sessions (all) and
// .../sessions/{sid} (one, by the id the user page shows).
func (h *Handler) endSessions(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	sid := r.PathValue("sid")
	if sid != "" && !account.ValidSessionID(sid) {
		return nil, badRequest("invalid_session", "the session id in the path is the id the user page lists, not %q", sid)
	}
	if id == c.user.ID {
		return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "not_allowed",
			msg: "end your own sessions with POST /api/user/logout_all or the home page's Log out everywhere"}
	}
	n, err := account.EndUserSessions(r.Context(), h.store, c.user, id, sid)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditUserSessions, account.UserTarget(id), nil, account.Fields{"sessions_ended": n})
	return map[string]any{"id": id, "sessions_ended": n}, nil
}

// planView is a configured plan as the picker shows it.
type planView struct {
	Name        string           `json:"name"`
	Models      []string         `json:"models"`
	Windows     map[string]int64 `json:"windows"`
	ThenBalance bool             `json:"then_balance"`
}

type groupView struct {
	Name    string           `json:"name"`
	Plan    string           `json:"plan,omitempty"`
	Windows map[string]int64 `json:"windows"`
}

// listPlans answers GET /api/admin/plans: the plans and budget groups
// configured, by name, for the console's pickers.
//
// The same answer carries, under "data", the plans as the pricing page
// edits them (each with its source, the Caddyfile or the database), when
// the gateway keeps runtime configuration.
func (h *Handler) listPlans(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	plans, groups := []planView{}, []groupView{}
	if h.budgets != nil {
		for _, name := range h.budgets.PlanNames() {
			p := h.budgets.PlanNamed(name)
			if p == nil {
				continue
			}
			models := p.Models
			if models == nil {
				models = []string{}
			}
			plans = append(plans, planView{Name: name, Models: models, Windows: windowMap(p.Windows), ThenBalance: p.ThenBalance})
		}
		for name, g := range h.budgets.Groups {
			groups = append(groups, groupView{Name: name, Plan: g.Plan, Windows: windowMap(g.Windows)})
		}
	}
	slices.SortFunc(plans, func(a, b planView) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(groups, func(a, b groupView) int { return strings.Compare(a.Name, b.Name) })
	answer := map[string]any{"plans": plans, "groups": groups}
	if h.runtime != nil {
		items, err := h.listItems(store.RuntimePlan)(w, r, c)
		if err != nil {
			return nil, err
		}
		answer["data"] = items.(map[string]any)["data"]
	}
	return answer, nil
}

// windowMap is limits by window name, the windows set only.
func windowMap(w billing.WindowLimits) map[string]int64 {
	out := map[string]int64{}
	for i, units := range w {
		if units > 0 {
			out[billing.WindowKind(i).String()] = units
		}
	}
	return out
}

// invitations answers GET /api/user/invitations: the caller's code, the
// reward rule as configured, and the people who signed up with the code,
// each with the reward still owed.
func (h *Handler) invitations(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	invitees, err := h.store.ListInvitees(r.Context(), c.user.ID, 100)
	if err != nil {
		return nil, err
	}
	type invitee struct {
		Username   string    `json:"username"`
		CreatedAt  time.Time `json:"created_at"`
		RewardOwed int64     `json:"reward_owed"`
		RewardMin  int64     `json:"reward_min,omitempty"`
	}
	list := make([]invitee, len(invitees))
	var pending int64
	for i, v := range invitees {
		list[i] = invitee{Username: v.Username, CreatedAt: v.CreatedAt, RewardOwed: v.RewardOwed}
		if v.RewardOwed > 0 {
			list[i].RewardMin = v.RewardMin
			pending += v.RewardOwed
		}
	}
	rule := h.gate.InvitationRule()
	least := rule.MinPayment
	if least <= 0 {
		least = rule.Amount // the reward itself, as the store reads 0
	}
	return map[string]any{"aff_code": c.user.InviteCode, "aff_quota": c.user.InvitationQuota,
		"reward": rule.Amount, "min_payment": least, "plan_codes": rule.PlanCodes,
		"registration": h.gate.RegistrationOpen() == nil, "invitees": list, "pending": pending}, nil
}
