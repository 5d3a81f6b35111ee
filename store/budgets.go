package store

import (
	"context"
	"time"
)

// Budgets: spending windows of keys, users and groups, a user's group and
// plan, and the spend committed per window period. The windows and plans
// themselves are the billing package's; the store keeps what an operator
// set and what was spent.

// BudgetStore is the store's part of spending windows.
type BudgetStore interface {
	// SetBudget sets subject's ("key:<id>", "user:<id>") limit in units
	// for window ("5h", "daily", "weekly", "monthly", "lifetime"); a limit
	// of 0 removes it.
	SetBudget(ctx context.Context, subject, window string, limit int64) error
	// Budgets returns each subject's limits by window; subjects without
	// any are absent.
	Budgets(ctx context.Context, subjects []string) (map[string]map[string]int64, error)
	// SetUserGroup puts a user in a budget group ("" takes them out).
	SetUserGroup(ctx context.Context, userID int64, group string) error
	// SetUserPlan assigns a user a plan until until (zero: no end); ""
	// removes the plan.
	SetUserPlan(ctx context.Context, userID int64, plan string, until time.Time) error
	// UserBudget is a user's group and plan; the zero value when none was
	// set.
	UserBudget(ctx context.Context, userID int64) (UserBudget, error)
	// WindowSpend returns the committed spend of each window id
	// ("user:3/daily@2026-11-26") asked for that has any. SettleBatch adds
	// every new row's cost to each id of its Windows, in its transaction.
	WindowSpend(ctx context.Context, ids []string) (map[string]int64, error)

	// ClaimWindow claims room in a window for an instance to admit
	// against in memory: under the window's lock row (lock), with claimed
	// the sum of the claims of the window's period ids, it adds
	// min(want, limit - claimed) to the last id's claim and returns it,
	// or claims nothing and returns 0 when that is less than least.
	ClaimWindow(ctx context.Context, lock string, ids []string, limit, want, least int64) (int64, error)
	// ReturnWindow adds delta to the claim of id: negative gives unused
	// room back, positive claims what was spent beyond a claim.
	ReturnWindow(ctx context.Context, id string, delta int64) error
}

// UserBudget is a user's budget group and plan.
type UserBudget struct {
	Group     string    `json:"group,omitempty"`
	Plan      string    `json:"plan,omitempty"`
	PlanUntil time.Time `json:"plan_until,omitempty"` // zero: no end
}

// MaxWindowIDs bounds the window ids one usage row carries.
const MaxWindowIDs = 16
