package billing

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// ModelGroups are named sets of models, by glob (claude-*), that keys,
// users and plans name as "group:<name>" instead of listing models.
type ModelGroups map[string][]string

// GroupPrefix marks a group in a model list.
const GroupPrefix = "group:"

// In reports whether model is in the group name.
func (g ModelGroups) In(name, model string) bool {
	for _, p := range g[name] {
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}

// Allows reports whether a model list (names and "group:<name>"s) holds
// model; an empty list allows every model.
func (g ModelGroups) Allows(list []string, model string) bool {
	if len(list) == 0 {
		return true
	}
	return slices.ContainsFunc(list, func(e string) bool {
		if name, ok := strings.CutPrefix(e, GroupPrefix); ok {
			return g.In(name, model)
		}
		return e == model
	})
}

// Check is an error naming the first group of list that is not defined.
func (g ModelGroups) Check(list []string) error {
	for _, e := range list {
		if name, ok := strings.CutPrefix(e, GroupPrefix); ok {
			if _, known := g[name]; !known {
				return fmt.Errorf("unknown model group %q: define it with 'models_group %s <model or glob>...'", name, name)
			}
		}
	}
	return nil
}

// Plan is an allowance a user (or a group's members) has for a period:
// requests within its windows and models are paid by the plan, not the
// balance. When the plan has no room, the balance pays only if
// ThenBalance.
type Plan struct {
	Name    string
	Windows WindowLimits
	// Models the plan pays for (names and groups); empty: every model
	Models []string
	// Limits are the rate limits of a user on the plan who has none of
	// their own
	Limits      store.Limits
	ThenBalance bool
	// Multipliers scale what the plan is charged for some models (a
	// model at 2x empties the plan's windows twice as fast), first match
	// first; the balance, when it pays, is charged the model's price
	Multipliers []ModelMultiplier
}

// UserGroup is a budget group: windows shared by its members together,
// and a plan each member without one of their own has.
type UserGroup struct {
	Windows WindowLimits
	Plan    string
}

// Budgets is a configuration's spending policy: the windows of groups and
// plans from the Caddyfile, those of users and keys from the store
// (cached for TTL), and the shared Spend that counts them.
type Budgets struct {
	Spend  *Spend
	Store  store.BudgetStore
	Loc    *time.Location // calendar windows' zone; nil is UTC
	Models ModelGroups
	Groups map[string]*UserGroup
	Plans  map[string]*Plan // the configuration's; see PlanNamed
	// TTL is how long a user's and key's settings are cached; a change
	// made by another process takes effect within it. Default 30s.
	TTL time.Duration

	mu    sync.Mutex
	users map[int64]*userBudget
	keys  map[int64]*keyBudget
	// runtime are the plans made at runtime, replaced whole (SetRuntimePlans)
	runtime atomic.Pointer[map[string]*Plan]
}

// PlanNamed is the subscription plan of that name, the configuration's
// or one made at runtime (the configuration's wins a name both have);
// nil when none.
func (b *Budgets) PlanNamed(name string) *Plan {
	if pl := b.Plans[name]; pl != nil {
		return pl
	}
	if m := b.runtime.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// SetRuntimePlans makes m the plans made at runtime; m is not changed after.
func (b *Budgets) SetRuntimePlans(m map[string]*Plan) { b.runtime.Store(&m) }

// PlanNames lists every plan's name, sorted: the configuration's and
// those made at runtime.
func (b *Budgets) PlanNames() []string {
	var out []string
	for name := range b.Plans {
		out = append(out, name)
	}
	if m := b.runtime.Load(); m != nil {
		for name := range *m {
			if b.Plans[name] == nil {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

type userBudget struct {
	own    WindowLimits
	b      store.UserBudget
	loaded time.Time
}

type keyBudget struct {
	own    WindowLimits
	loaded time.Time
}

// maxCached bounds each of the caches; past it, expired entries go.
const maxCached = 100_000

func (b *Budgets) loc() *time.Location {
	if b.Loc == nil {
		return time.UTC
	}
	return b.Loc
}

func (b *Budgets) ttl() time.Duration {
	if b.TTL <= 0 {
		return 30 * time.Second
	}
	return b.TTL
}

// Profile is what applies to one user's request through one key.
type Profile struct {
	// Caps are the key's, the user's and the group's windows: they bound
	// every request, whoever pays
	Caps []Budget
	// Plan is the user's plan in force, nil for none; PlanBudget its
	// windows for this user
	Plan       *Plan
	PlanBudget Budget
}

// Limits are the user's rate limits with the plan's where the user has
// none of their own.
func (p *Profile) Limits(own store.Limits) store.Limits {
	if p == nil || p.Plan == nil {
		return own
	}
	return Effective(own, p.Plan.Limits)
}

// Profile resolves what applies to u's request through t at now, from
// memory when the cached settings are fresh, else with one read of each.
func (b *Budgets) Profile(ctx context.Context, now time.Time, u *store.User, t *store.Token) (*Profile, error) {
	ub, kb, err := b.settings(ctx, now, u.ID, t.ID)
	if err != nil {
		return nil, err
	}
	p := &Profile{}
	if kb.own.Any() {
		p.Caps = append(p.Caps, Budget{Subject: "key:" + strconv.FormatInt(t.ID, 10), Limits: kb.own})
	}
	if ub.own.Any() {
		p.Caps = append(p.Caps, Budget{Subject: "user:" + strconv.FormatInt(u.ID, 10), Limits: ub.own})
	}
	plan := ""
	if g := b.Groups[ub.b.Group]; g != nil {
		if g.Windows.Any() {
			p.Caps = append(p.Caps, Budget{Subject: "group:" + ub.b.Group, Limits: g.Windows})
		}
		plan = g.Plan
	}
	if ub.b.Plan != "" && (ub.b.PlanUntil.IsZero() || now.Before(ub.b.PlanUntil)) {
		plan = ub.b.Plan
	}
	if pl := b.PlanNamed(plan); pl != nil {
		p.Plan = pl
		p.PlanBudget = Budget{Subject: "plan:" + pl.Name + "/user:" + strconv.FormatInt(u.ID, 10), Limits: pl.Windows}
	}
	return p, nil
}

// settings are the cached user's and key's own settings, read again once
// older than TTL.
func (b *Budgets) settings(ctx context.Context, now time.Time, userID, tokenID int64) (*userBudget, *keyBudget, error) {
	b.mu.Lock()
	if b.users == nil {
		b.users, b.keys = map[int64]*userBudget{}, map[int64]*keyBudget{}
	}
	ub, kb := b.users[userID], b.keys[tokenID]
	fresh := ub != nil && kb != nil && now.Sub(ub.loaded) < b.ttl() && now.Sub(kb.loaded) < b.ttl()
	b.mu.Unlock()
	if fresh || b.Store == nil {
		if ub == nil {
			ub = &userBudget{}
		}
		if kb == nil {
			kb = &keyBudget{}
		}
		return ub, kb, nil
	}
	us, ks := "user:"+strconv.FormatInt(userID, 10), "key:"+strconv.FormatInt(tokenID, 10)
	limits, err := b.Store.Budgets(ctx, []string{us, ks})
	var ubs store.UserBudget
	if err == nil {
		ubs, err = b.Store.UserBudget(ctx, userID)
	}
	if err != nil {
		if ub != nil && kb != nil {
			return ub, kb, nil // stale beats refusing while the store is away
		}
		return nil, nil, err
	}
	ub = &userBudget{own: windowLimits(limits[us]), b: ubs, loaded: now}
	kb = &keyBudget{own: windowLimits(limits[ks]), loaded: now}
	b.mu.Lock()
	if len(b.users) >= maxCached || len(b.keys) >= maxCached {
		for id, e := range b.users {
			if now.Sub(e.loaded) >= b.ttl() {
				delete(b.users, id)
			}
		}
		for id, e := range b.keys {
			if now.Sub(e.loaded) >= b.ttl() {
				delete(b.keys, id)
			}
		}
	}
	b.users[userID], b.keys[tokenID] = ub, kb
	b.mu.Unlock()
	return ub, kb, nil
}

// Forget drops a user's and a key's cached settings (0: none), so a
// change this process made applies at the next request.
func (b *Budgets) Forget(userID, tokenID int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.users, userID)
	delete(b.keys, tokenID)
}

func windowLimits(m map[string]int64) WindowLimits {
	var w WindowLimits
	for name, v := range m {
		if k, ok := ParseWindowKind(name); ok {
			w[k] = v
		}
	}
	return w
}

// PlanModelError is a model the user's plan does not pay for, and the
// balance may not pay instead.
type PlanModelError struct {
	Plan  string
	Model string
}

func (e *PlanModelError) Error() string {
	return fmt.Sprintf("the plan %s does not cover the model %s", e.Plan, e.Model)
}

// Hold reserves amount in the windows of p for a request for model: the
// plan's first (the plan pays), and when it has no room and the plan says
// so, or the model is not the plan's, the balance (planPaid false); the
// caps in every case. With scale, a plan that pays holds amount at its
// multiplier for the model (WindowHold.Charge settles at it too). The
// error is a *WindowRefusal, a *PlanModelError or the store's.
func (b *Budgets) Hold(ctx context.Context, now time.Time, p *Profile, model string, amount int64, scale bool) (*WindowHold, error) {
	budgets := p.Caps
	if pl := p.Plan; pl != nil {
		covered := b.Models.Allows(pl.Models, model)
		switch {
		case covered:
			m := MultiplierOne
			if scale {
				m = pl.Multiplier(b.Models, model)
			}
			h, err := b.Spend.Hold(ctx, now, b.loc(), append(slices.Clip(budgets), p.PlanBudget), m.Apply(amount))
			if _, full := err.(*WindowRefusal); err == nil || !full || !pl.ThenBalance {
				if h != nil {
					h.Plan, h.Multiplier = pl.Name, m
				}
				return h, err
			}
			// the plan is full: the balance pays, within the caps
		case !pl.ThenBalance:
			return nil, &PlanModelError{Plan: pl.Name, Model: model}
		}
	}
	if len(budgets) == 0 {
		return nil, nil
	}
	return b.Spend.Hold(ctx, now, b.loc(), budgets, amount)
}

// Status reports the windows of p: the caps, then the plan's.
func (b *Budgets) Status(ctx context.Context, now time.Time, p *Profile) ([]WindowStatus, error) {
	budgets := p.Caps
	if p.Plan != nil {
		budgets = append(slices.Clip(budgets), p.PlanBudget)
	}
	return b.Spend.Status(ctx, now, b.loc(), budgets)
}

// BudgetHeaders are the response headers of the tightest window.
const (
	HeaderBudgetRemaining = "x-gateway-budget-remaining"
	HeaderBudgetReset     = "x-gateway-budget-reset"
)

// profile is what applies to ask, nil without budgets; a store that cannot
// say is billing unavailable.
func (g *Gate) profile(now time.Time, ask Ask) (*Profile, error) {
	if g.Budgets == nil {
		return nil, nil
	}
	p, err := g.Budgets.Profile(context.Background(), now, ask.User, ask.Token)
	if err != nil {
		return nil, &UsageRefusal{Err: fmt.Errorf("%w: reading budgets: %w", ErrUnavailable, err)}
	}
	return p, nil
}

// holdWindows reserves amount in p's windows (nil: none apply).
func (g *Gate) holdWindows(now time.Time, p *Profile, model string, amount int64, scale bool) (*WindowHold, error) {
	if p == nil {
		return nil, nil
	}
	h, err := g.Budgets.Hold(context.Background(), now, p, model, amount, scale)
	if _, ok := err.(*WindowRefusal); ok {
		return nil, err
	}
	if _, ok := err.(*PlanModelError); ok {
		return nil, err
	}
	if err != nil {
		return nil, &UsageRefusal{Err: fmt.Errorf("%w: reading window spend: %w", ErrUnavailable, err)}
	}
	return h, nil
}

// Room is what the caller may still hold: within the caps, the plan's
// room when a plan in force pays for model (or the larger of it and the
// balance's when the balance pays after), else the balance's. The plan's
// room is counted before its multiplier for the model: what a reservation
// may be so that, multiplied, it fits. It reads cached settings:
// admission loaded them just before.
func (g *Gate) Room(u *store.User, t *store.Token, model string) int64 {
	if g.Budgets == nil {
		return g.Ledger.Room(u, t)
	}
	now := time.Now()
	p, err := g.Budgets.Profile(context.Background(), now, u, t)
	if err != nil {
		return g.Ledger.Room(u, t)
	}
	st, err := g.Budgets.Status(context.Background(), now, p)
	if err != nil {
		return 0 // the windows cannot be read: the admission refuses anyway
	}
	const unbounded = int64(1<<63 - 1)
	caps, plan := unbounded, unbounded
	for _, w := range st {
		left := max(w.Limit-w.Spent, 0)
		if p.Plan != nil && w.Subject == p.PlanBudget.Subject {
			plan = min(plan, left)
		} else {
			caps = min(caps, left)
		}
	}
	covered := p.Plan != nil && g.Budgets.Models.Allows(p.Plan.Models, model)
	if !covered {
		return min(g.Ledger.Room(u, t), caps)
	}
	byPlan := p.Plan.Multiplier(g.Budgets.Models, model).Room(min(plan, caps))
	if p.Plan.ThenBalance {
		return max(byPlan, min(g.Ledger.Room(u, t), caps))
	}
	return byPlan
}

// Charged is what a usage row takes from its user's balance and its key's
// used quota: nothing when a plan paid it (store.UsageLog.Plan).
func Charged(r *store.UsageLog) int64 {
	if r.Plan != "" {
		return 0
	}
	return r.Cost
}

// Models are the configuration's model groups (none without budgets).
func (g *Gate) Models() ModelGroups {
	if g.Budgets == nil {
		return nil
	}
	return g.Budgets.Models
}
