package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// defaultListLimit is the page size of listings whose filter names none.
const defaultListLimit = 100

// RegisterUser creates u, as CreateUser does, and when u.InvitedBy is set
// records reward as owed to the inviter, paid by the invitee's first
// payment (Redeem, CreditQuota). An inviter that does not exist is
// store.ErrNotFound and nothing is created.
func (s *Store) RegisterUser(ctx context.Context, u *store.User, reward store.InvitationReward) error {
	minPayment, err := store.RewardMinimum(reward)
	if err != nil {
		return fmt.Errorf("register user: %w", err)
	}
	var id int64
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if u.InvitedBy != 0 {
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM users WHERE id = $1`, u.InvitedBy).Scan(&one)
			if err != nil {
				return notFound(err, fmt.Sprintf("inviter %d", u.InvitedBy))
			}
		}
		var err error
		if id, err = insertUser(ctx, tx, u); err != nil {
			return err
		}
		if u.InvitedBy != 0 && reward.Amount > 0 {
			if _, err := tx.Exec(ctx, `UPDATE users SET invitation_reward_owed = $1,
				invitation_reward_min = $2, invitation_reward_plans = $3 WHERE id = $4`,
				reward.Amount, minPayment, reward.PlanCodes, id); err != nil {
				return fmt.Errorf("record the invitation reward: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("register user %q: %w", u.Username, err)
	}
	u.ID = id
	return nil
}

// payInvitationReward pays what userID's signup owes their inviter, if
// anything and if this payment (payment units, or a plan code) is one the
// reward's rule accepts, inside the payment's transaction; a smaller
// payment leaves the reward owed to a later one. The caller has locked the
// user and the inviter (lockPayer), so of payments racing on any number of
// instances the first zeroes the debt and the others find none.
func payInvitationReward(ctx context.Context, tx pgx.Tx, userID, payment int64, plan bool) error {
	var inviter, owed int64
	err := tx.QueryRow(ctx, `SELECT invited_by, invitation_reward_owed FROM users
		WHERE id = $1 AND invitation_reward_owed > 0
		AND ($2 >= invitation_reward_min OR ($3 AND invitation_reward_plans))`,
		userID, payment, plan).Scan(&inviter, &owed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("invitation reward of user %d: %w", userID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE users SET invitation_reward_owed = 0 WHERE id = $1`, userID); err != nil {
		return fmt.Errorf("invitation reward of user %d: %w", userID, err)
	}
	// an inviter deleted since is simply not paid
	if _, err := tx.Exec(ctx, `UPDATE users SET invitation_quota = `+addSat("invitation_quota", "$1")+`
		WHERE id = $2`, owed, inviter); err != nil {
		return fmt.Errorf("pay inviter %d: %w", inviter, err)
	}
	return nil
}

// CreditQuota adds a payment of amount units to a user's balance and, on
// their first payment, pays their inviter's reward, in one transaction.
func (s *Store) CreditQuota(ctx context.Context, userID int64, amount int64) error {
	if amount <= 0 {
		return fmt.Errorf("credit user %d: amount must be positive, got %d", userID, amount)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		quota, err := lockPayer(ctx, tx, userID)
		if err != nil {
			return err
		}
		if err := credit(ctx, tx, userID, quota, amount); err != nil {
			return err
		}
		return payInvitationReward(ctx, tx, userID, amount, false)
	})
}

// ListUsers returns users with an id above f.AfterID, oldest first, at most
// f.Limit (100 when not positive).
func (s *Store) ListUsers(ctx context.Context, f store.UserFilter) ([]*store.User, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	q, args := `SELECT `+store.UserColumns+` FROM users WHERE id > $1`, []any{f.AfterID}
	if f.Search != "" {
		args = append(args, store.LikePart(f.Search))
		q += ` AND username ILIKE $2`
	}
	if f.Plan != "" {
		args = append(args, f.Plan)
		q += ` AND id IN (SELECT user_id FROM user_budgets WHERE plan = $` + strconv.Itoa(len(args)) + `)`
	}
	if f.Group != "" {
		args = append(args, f.Group)
		q += ` AND id IN (SELECT user_id FROM user_budgets WHERE budget_group = $` + strconv.Itoa(len(args)) + `)`
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, q+` ORDER BY id LIMIT $`+strconv.Itoa(len(args)), args...)
	return collect(rows, err, store.ScanUser, "list users")
}

// SetUserStatus enables or disables a user.
func (s *Store) SetUserStatus(ctx context.Context, userID int64, status string) error {
	if err := store.KnownStatus(status); err != nil {
		return fmt.Errorf("set status of user %d: %w", userID, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET status = $1 WHERE id = $2`, status, userID)
	if err != nil {
		return fmt.Errorf("set status of user %d: %w", userID, err)
	}
	return mustAffect(tag, fmt.Sprintf("user %d", userID))
}

// SetUserRole changes a user's role.
func (s *Store) SetUserRole(ctx context.Context, userID int64, role string) error {
	if err := store.KnownRole(role); err != nil {
		return fmt.Errorf("set role of user %d: %w", userID, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET role = $1 WHERE id = $2`, role, userID)
	if err != nil {
		return fmt.Errorf("set role of user %d: %w", userID, err)
	}
	return mustAffect(tag, fmt.Sprintf("user %d", userID))
}

// UpdateUser applies an administrator's change to a user in one
// transaction: status, role, quota, limits and the ending of sessions
// are all made or none is. The user is locked first, so a debit is checked
// against the balance it is then taken from, whatever another instance
// settles meanwhile.
func (s *Store) UpdateUser(ctx context.Context, userID int64, c store.UserChange) (*store.User, error) {
	if err := store.CheckUserChange(userID, c); err != nil {
		return nil, err
	}
	var u *store.User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		quota, err := lockPayer(ctx, tx, userID)
		if err != nil {
			return err
		}
		if c.Status != nil {
			if _, err := tx.Exec(ctx, `UPDATE users SET status = $1 WHERE id = $2`, *c.Status, userID); err != nil {
				return fmt.Errorf("set status: %w", err)
			}
		}
		if c.Role != nil {
			if _, err := tx.Exec(ctx, `UPDATE users SET role = $1 WHERE id = $2`, *c.Role, userID); err != nil {
				return fmt.Errorf("set role: %w", err)
			}
		}
		if c.QuotaDelta != 0 {
			if quota+c.QuotaDelta < 0 {
				return fmt.Errorf("add %d to a balance of %d: %w", c.QuotaDelta, quota, store.ErrInsufficientQuota)
			}
			if err := credit(ctx, tx, userID, quota, c.QuotaDelta); err != nil {
				return err
			}
			if c.QuotaDelta > 0 {
				if err := payInvitationReward(ctx, tx, userID, c.QuotaDelta, false); err != nil {
					return err
				}
			}
		}
		if l := c.Limits; l != nil {
			if _, err := tx.Exec(ctx, `UPDATE users SET rpm = $1, tpm = $2, max_parallel = $3 WHERE id = $4`,
				l.RPM, l.TPM, l.MaxParallel, userID); err != nil {
				return fmt.Errorf("set limits: %w", err)
			}
		}
		if c.EndSessions {
			if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
				return fmt.Errorf("end sessions: %w", err)
			}
		}
		u, err = store.ScanUser(tx.QueryRow(ctx, `SELECT `+store.UserColumns+` FROM users WHERE id = $1`, userID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update user %d: %w", userID, err)
	}
	return u, nil
}
