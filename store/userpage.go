package store

import (
	"context"
	"time"
)

// UserPageStore is what an administrator's page about one user reads
// beyond the user's own row: their logins and the people they invited.
type UserPageStore interface {
	// ListUserSessions returns userID's live sessions, newest first.
	ListUserSessions(ctx context.Context, userID int64) ([]*Session, error)
	// ListInvitees returns up to limit users inviterID invited, newest
	// first, each with the reward their signup still owes the inviter.
	ListInvitees(ctx context.Context, inviterID int64, limit int) ([]*Invitee, error)
	// UserBudgetsOf is UserBudget of each user of ids that has a group or
	// a plan set, in one read (a users list shows them): the others are
	// absent.
	UserBudgetsOf(ctx context.Context, ids []int64) (map[int64]UserBudget, error)
}

// UserBudgetOf is one user's group and plan, as UserBudgetsOf reads them.
type UserBudgetOf struct {
	UserID int64
	UserBudget
}

// ScanUserBudgetOf reads a row of user_id and UserBudgetColumns.
func ScanUserBudgetOf(sc RowScanner) (UserBudgetOf, error) {
	var (
		out   UserBudgetOf
		until int64
	)
	if err := sc.Scan(&out.UserID, &out.Group, &out.Plan, &until); err != nil {
		return out, err
	}
	out.PlanUntil = FromMillisOrZero(until)
	return out, nil
}

// Invitee is a user someone invited, as their inviter may see them.
type Invitee struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	CreatedAt time.Time `json:"created_at"`
	// RewardOwed is the reward (units) still to be paid to the inviter
	// by the invitee's first payment large enough; 0: paid, or none.
	RewardOwed int64 `json:"reward_owed"`
	// RewardMin is the smallest payment that pays it.
	RewardMin int64 `json:"reward_min"`
}

// InviteeColumns are the users columns ScanInvitee reads, in its order.
const InviteeColumns = `id, username, created_at, invitation_reward_owed, invitation_reward_min`

// ScanInvitee reads a row of InviteeColumns.
func ScanInvitee(sc RowScanner) (*Invitee, error) {
	var (
		v         Invitee
		createdAt *int64
	)
	if err := sc.Scan(&v.ID, &v.Username, &createdAt, &v.RewardOwed, &v.RewardMin); err != nil {
		return nil, err
	}
	v.CreatedAt = FromMillis(createdAt)
	if v.RewardOwed > 0 && v.RewardMin <= 0 {
		v.RewardMin = v.RewardOwed // owed before minimums were kept: the reward itself
	}
	return &v, nil
}
