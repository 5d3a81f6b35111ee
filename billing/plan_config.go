package billing

import (
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// BudgetConfig is the configuration of spending windows, plans and model
// groups as the gateway's JSON holds it; amounts are USD as decimal
// strings, converted to units once, by Build.
type BudgetConfig struct {
	// Timezone of the daily, weekly and monthly windows (an IANA name,
	// "Asia/Shanghai"). Default UTC.
	Timezone string `json:"timezone,omitempty"`
	// ModelGroups are named sets of models by glob ("claude-*").
	ModelGroups map[string][]string `json:"model_groups,omitempty"`
	// Groups are budget groups of users, by name.
	Groups map[string]*GroupConfig `json:"groups,omitempty"`
	// Plans by name.
	Plans map[string]*PlanConfig `json:"plans,omitempty"`
}

// GroupConfig is a budget group: windows its members share, and the plan
// each member without one of their own has.
type GroupConfig struct {
	Windows map[string]string `json:"windows,omitempty"` // window name ("5h", "daily", ...) → USD
	Plan    string            `json:"plan,omitempty"`
}

// PlanConfig is a plan.
type PlanConfig struct {
	Windows map[string]string `json:"windows,omitempty"` // window name → USD
	// Models the plan pays for: names and "group:<name>"; empty: all
	Models      []string `json:"models,omitempty"`
	RPM         int64    `json:"rpm,omitempty"`
	TPM         int64    `json:"tpm,omitempty"`
	MaxParallel int64    `json:"max_parallel,omitempty"`
	// ThenBalance lets the balance pay when the plan has no room (or for
	// a model the plan does not cover); otherwise those are refused
	ThenBalance bool `json:"then_balance,omitempty"`
	// Multipliers scale what the plan is charged for some models; the
	// first that names a model applies
	Multipliers []MultiplierConfig `json:"multipliers,omitempty"`
}

// MultiplierConfig charges the plan Factor (a decimal: "0.5", "2") times
// the price of the models listed (names and "group:<name>").
type MultiplierConfig struct {
	Models []string `json:"models"`
	Factor string   `json:"factor"`
}

// ParseWindows converts a window name → USD map to limits in units.
func ParseWindows(m map[string]string) (WindowLimits, error) {
	var w WindowLimits
	for name, usd := range m {
		k, ok := ParseWindowKind(name)
		if !ok {
			return w, fmt.Errorf("unknown window %q: use one of %s", name, WindowNames())
		}
		u, err := ParseUSD(usd)
		if err != nil {
			return w, fmt.Errorf("window %s: %w", name, err)
		}
		if u <= 0 {
			return w, fmt.Errorf("window %s: the limit must be more than 0 USD", name)
		}
		w[k] = u
	}
	return w, nil
}

// Build checks the configuration (a time zone that exists, every window's
// amount, every model group and plan named defined) and returns the
// policy over spend and st, caching settings for ttl.
func (c *BudgetConfig) Build(spend *Spend, st store.BudgetStore, ttl time.Duration) (*Budgets, error) {
	b := &Budgets{Spend: spend, Store: st, TTL: ttl, Models: ModelGroups{}, Groups: map[string]*UserGroup{}, Plans: map[string]*Plan{}}
	if c == nil {
		return b, nil
	}
	if c.Timezone != "" {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return nil, fmt.Errorf("budget_timezone %q: %w", c.Timezone, err)
		}
		b.Loc = loc
	}
	for name, pats := range c.ModelGroups {
		if len(pats) == 0 {
			return nil, fmt.Errorf("models_group %s: no model", name)
		}
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("models_group %s: bad pattern %q: %w", name, p, err)
			}
		}
		b.Models[name] = slices.Clone(pats)
	}
	for name, pc := range c.Plans {
		pl, err := b.BuildPlan(name, pc)
		if err != nil {
			return nil, err
		}
		b.Plans[name] = pl
	}
	for name, gc := range c.Groups {
		w, err := ParseWindows(gc.Windows)
		if err != nil {
			return nil, fmt.Errorf("budget_group %s: %w", name, err)
		}
		if gc.Plan != "" && b.Plans[gc.Plan] == nil {
			return nil, fmt.Errorf("budget_group %s: unknown plan %q: define it with 'plan %s { ... }'", name, gc.Plan, gc.Plan)
		}
		b.Groups[name] = &UserGroup{Windows: w, Plan: gc.Plan}
	}
	return b, nil
}

// BuildPlan makes the plan name of pc, its model groups checked against
// b's: the configuration's plans and those made at runtime alike.
func (b *Budgets) BuildPlan(name string, pc *PlanConfig) (*Plan, error) {
	w, err := ParseWindows(pc.Windows)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	if err := b.Models.Check(pc.Models); err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	if pc.RPM < 0 || pc.TPM < 0 || pc.MaxParallel < 0 {
		return nil, fmt.Errorf("plan %s: rate limits must not be negative", name)
	}
	var mult []ModelMultiplier
	for _, mc := range pc.Multipliers {
		if len(mc.Models) == 0 {
			return nil, fmt.Errorf("plan %s: multiplier %s names no model", name, mc.Factor)
		}
		if err := b.Models.Check(mc.Models); err != nil {
			return nil, fmt.Errorf("plan %s: multiplier: %w", name, err)
		}
		f, err := ParseMultiplier(mc.Factor)
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", name, err)
		}
		mult = append(mult, ModelMultiplier{Models: slices.Clone(mc.Models), Factor: f})
	}
	return &Plan{Name: name, Windows: w, Models: pc.Models, ThenBalance: pc.ThenBalance,
		Limits: store.Limits{RPM: pc.RPM, TPM: pc.TPM, MaxParallel: pc.MaxParallel}, Multipliers: mult}, nil
}
