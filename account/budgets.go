package account

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Budgets: an administrator (or the Operator) sets the spending windows
// of a user or a key, puts a user in a budget group and assigns a plan.
// Limits go the way rate limits go: only root changes an administrator's.

// BudgetChange is windows to set, by name ("5h", "daily", "weekly",
// "monthly", "lifetime"), in USD as decimal strings; "0" removes one.
type BudgetChange map[string]string

// parse converts the change to units, checking every window's name and
// amount before anything is written.
func (c BudgetChange) parse() (map[string]int64, error) {
	out := map[string]int64{}
	for name, usd := range c {
		if _, ok := billing.ParseWindowKind(name); !ok {
			return nil, invalidf("unknown_window", "unknown window %q: the windows are %s", name, billing.WindowNames())
		}
		u, err := billing.ParseUSD(usd)
		if err != nil || u < 0 {
			return nil, invalidf("invalid_amount", "window %s: %q is not an amount of USD (0 removes the window)", name, usd)
		}
		out[name] = u
	}
	return out, nil
}

// Audited is the audit entry of a change a function here made, for its
// caller to write with Audit (the change is made by then: a failed write
// is the caller's to report, as for its other changes).
type Audited struct {
	Action, Target string
	Before, After  Fields
}

// SetUserBudget sets windows of user id's own budget, as actor.
func SetUserBudget(ctx context.Context, st store.Store, actor *store.User, id int64, c BudgetChange) (Audited, error) {
	u, err := st.UserByID(ctx, id)
	if err != nil {
		return Audited{}, err
	}
	if err := maySetKeyLimits(actor, u); err != nil {
		return Audited{}, err
	}
	return setBudget(ctx, st, AuditUserBudget, UserTarget(id), c)
}

// SetKeyBudget sets windows of key id's own budget, as actor.
func SetKeyBudget(ctx context.Context, st store.Store, actor *store.User, id int64, c BudgetChange) (Audited, error) {
	t, err := st.TokenByID(ctx, id)
	if err != nil {
		return Audited{}, err
	}
	owner, err := st.UserByID(ctx, t.UserID)
	if err != nil {
		return Audited{}, err
	}
	if err := maySetKeyLimits(actor, owner); err != nil {
		return Audited{}, err
	}
	return setBudget(ctx, st, AuditKeyBudget, KeyTarget(id), c)
}

// setBudget sets the windows of subject (the audit target's form, such
// as "user:7"), and says what they were and are, in USD.
func setBudget(ctx context.Context, st store.Store, action, subject string, c BudgetChange) (Audited, error) {
	units, err := c.parse()
	if err != nil {
		return Audited{}, err
	}
	windows := func() (Fields, error) {
		b, err := st.Budgets(ctx, []string{subject})
		if err != nil {
			return nil, err
		}
		f := Fields{}
		for name := range units {
			f[name] = "0" // none
			if u, ok := b[subject][name]; ok && u > 0 {
				f[name] = usd(u)
			}
		}
		return f, nil
	}
	before, err := windows()
	if err != nil {
		return Audited{}, err
	}
	for name, u := range units {
		if err := st.SetBudget(ctx, subject, name, u); err != nil {
			return Audited{}, err
		}
	}
	after := Fields{}
	for name, u := range units {
		after[name] = usd(u)
	}
	return Audited{Action: action, Target: subject, Before: before, After: after}, nil
}

// usd writes units as a decimal amount of USD, as budgets are given.
func usd(units int64) string {
	s := strconv.FormatInt(units/billing.UnitsPerUSD, 10)
	if frac := units % billing.UnitsPerUSD; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return s
}

// PlanChange assigns a user a group and a plan; nil fields stay.
type PlanChange struct {
	Group *string `json:"group,omitempty"`
	Plan  *string `json:"plan,omitempty"`
	// Until ends the plan (RFC 3339); empty: no end
	Until string `json:"until,omitempty"`
}

// SetUserPlan applies c to user id, as actor. known says whether a group
// or plan name is configured (nil: any name, as the CLI cannot tell).
func SetUserPlan(ctx context.Context, st store.Store, actor *store.User, id int64, c PlanChange, known func(kind, name string) bool) (store.UserBudget, Audited, error) {
	u, err := st.UserByID(ctx, id)
	if err != nil {
		return store.UserBudget{}, Audited{}, err
	}
	if err := maySetKeyLimits(actor, u); err != nil {
		return store.UserBudget{}, Audited{}, err
	}
	var until time.Time
	if c.Until != "" {
		if until, err = time.Parse(time.RFC3339, c.Until); err != nil {
			return store.UserBudget{}, Audited{}, invalidf("invalid_until", "until %q is not an RFC 3339 time (2026-12-31T00:00:00Z)", c.Until)
		}
	}
	for _, n := range []struct {
		kind string
		name *string
	}{{"group", c.Group}, {"plan", c.Plan}} {
		if n.name != nil && *n.name != "" && known != nil && !known(n.kind, *n.name) {
			return store.UserBudget{}, Audited{}, invalidf("unknown_"+n.kind, "no %s named %q is configured in the gateway's Caddyfile", n.kind, *n.name)
		}
	}
	before, err := st.UserBudget(ctx, id)
	if err != nil {
		return store.UserBudget{}, Audited{}, err
	}
	if c.Group != nil {
		if err := st.SetUserGroup(ctx, id, *c.Group); err != nil {
			return store.UserBudget{}, Audited{}, err
		}
	}
	if c.Plan != nil {
		if err := st.SetUserPlan(ctx, id, *c.Plan, until); err != nil {
			return store.UserBudget{}, Audited{}, err
		}
	}
	after, err := st.UserBudget(ctx, id)
	if err != nil {
		return store.UserBudget{}, Audited{}, err
	}
	return after, Audited{Action: AuditUserPlan, Target: UserTarget(id), Before: planFields(before), After: planFields(after)}, nil
}

// planFields is a user's group and plan as the audit log shows them.
func planFields(b store.UserBudget) Fields {
	f := Fields{"group": b.Group, "plan": b.Plan, "plan_until": nil}
	if !b.PlanUntil.IsZero() {
		f["plan_until"] = b.PlanUntil.UTC().Format(time.RFC3339)
	}
	return f
}

// BudgetView is a user's spending windows as they see them.
type BudgetView struct {
	Group     string            `json:"group,omitempty"`
	Plan      string            `json:"plan,omitempty"`
	PlanUntil *time.Time        `json:"plan_until,omitempty"`
	Windows   []WindowStatusOut `json:"windows"`
}

// WindowStatusOut is one window: spend, limit and reset in units and
// RFC 3339 (no reset_at: the lifetime window, which never resets).
type WindowStatusOut struct {
	Subject string     `json:"subject"`
	Window  string     `json:"window"`
	Limit   int64      `json:"limit"`
	Spent   int64      `json:"spent"`
	ResetAt *time.Time `json:"reset_at,omitempty"`
}

// ViewBudget shows a user's windows through token (or, logged in, their
// own and their group's and plan's).
func ViewBudget(ctx context.Context, b *billing.Budgets, st store.Store, u *store.User, t *store.Token) (*BudgetView, error) {
	if b == nil {
		return nil, nil
	}
	if t == nil {
		t = &store.Token{}
	}
	p, err := b.Profile(ctx, time.Now(), u, t)
	if err != nil {
		return nil, err
	}
	ws, err := b.Status(ctx, time.Now(), p)
	if err != nil {
		return nil, err
	}
	ub, err := st.UserBudget(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	v := &BudgetView{Group: ub.Group, Windows: []WindowStatusOut{}}
	if p.Plan != nil {
		v.Plan = p.Plan.Name
		if ub.Plan == p.Plan.Name && !ub.PlanUntil.IsZero() {
			v.PlanUntil = &ub.PlanUntil
		}
	}
	for _, w := range ws {
		o := WindowStatusOut{Subject: w.Subject, Window: w.Window, Limit: w.Limit, Spent: w.Spent}
		if !w.Reset.IsZero() {
			r := w.Reset.UTC()
			o.ResetAt = &r
		}
		v.Windows = append(v.Windows, o)
	}
	return v, nil
}

// CreatePlanCodes creates count codes that each grant plan for days
// (instead of quota) when redeemed.
func CreatePlanCodes(ctx context.Context, st store.Store, name string, count int, plan string, days int64, expiresAt time.Time) ([]*store.RedemptionCode, error) {
	var worth error
	if plan == "" || days <= 0 || days > 3660 {
		worth = inputErrorf("a plan code needs a plan and between 1 and 3660 days")
	}
	return createCodes(ctx, st, store.RedemptionCode{Name: name, Plan: plan, PlanDays: days, ExpiresAt: expiresAt}, count, worth)
}
