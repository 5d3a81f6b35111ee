package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if u.InvitedBy != 0 {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = ?`, u.InvitedBy).Scan(&one)
			if err != nil {
				return notFound(err, fmt.Sprintf("inviter %d", u.InvitedBy))
			}
		}
		var err error
		if id, err = insertUser(ctx, tx, u); err != nil {
			return err
		}
		if u.InvitedBy != 0 && reward.Amount > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE users SET invitation_reward_owed = ?,
				invitation_reward_min = ?, invitation_reward_plans = ? WHERE id = ?`,
				reward.Amount, minPayment, boolInt(reward.PlanCodes), id); err != nil {
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
// reward's rule accepts, inside the payment's transaction: the owed amount
// is zeroed in the statement that reads it, so it is paid once however
// many payments race (the writer's transactions hold the write lock from
// BEGIN). A smaller payment leaves the reward owed to a later one.
func payInvitationReward(ctx context.Context, tx *sql.Tx, userID, payment int64, plan bool) error {
	var inviter, owed int64
	err := tx.QueryRowContext(ctx, `SELECT invited_by, invitation_reward_owed FROM users
		WHERE id = ? AND invitation_reward_owed > 0
		AND (? >= invitation_reward_min OR (? = 1 AND invitation_reward_plans = 1))`,
		userID, payment, boolInt(plan)).Scan(&inviter, &owed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("invitation reward of user %d: %w", userID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET invitation_reward_owed = 0 WHERE id = ?`, userID); err != nil {
		return fmt.Errorf("invitation reward of user %d: %w", userID, err)
	}
	// an inviter deleted since is simply not paid
	if _, err := tx.ExecContext(ctx, `UPDATE users SET invitation_quota = invitation_quota + ?
		WHERE id = ? AND typeof(invitation_quota + ?) = 'integer'`, owed, inviter, owed); err != nil {
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
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := credit(ctx, tx, userID, amount); err != nil {
			return err
		}
		return payInvitationReward(ctx, tx, userID, amount, false)
	})
}

// credit adds amount to a user's balance within tx, refusing a sum past
// the int64 range (SQLite would store it as a REAL, a balance no int64
// read can load) and a missing user.
func credit(ctx context.Context, tx *sql.Tx, userID, amount int64) error {
	res, err := tx.ExecContext(ctx, `UPDATE users SET quota = quota + ?
		WHERE id = ? AND typeof(quota + ?) = 'integer'`, amount, userID, amount)
	if err != nil {
		return fmt.Errorf("credit user %d: %w", userID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return err
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = ?`, userID).Scan(&one); err != nil {
			return notFound(err, fmt.Sprintf("user %d", userID))
		}
		return fmt.Errorf("credit %d to user %d: the balance would overflow", amount, userID)
	}
	return nil
}

// collect is store.Collect, closing the rows of a query that ran.
func collect[T any](rows *sql.Rows, err error, scan func(store.RowScanner) (T, error), format string, args ...any) ([]T, error) {
	if err == nil {
		defer rows.Close()
	}
	return store.Collect(rows, err, scan, format, args...)
}

// ListUsers returns users with an id above f.AfterID, oldest first, at most
// f.Limit (100 when not positive).
func (s *Store) ListUsers(ctx context.Context, f store.UserFilter) ([]*store.User, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	q, args := `SELECT `+store.UserColumns+` FROM users WHERE id > ?`, []any{f.AfterID}
	if f.Search != "" {
		// LIKE ignores ASCII case in SQLite
		q, args = q+` AND username LIKE ? ESCAPE '\'`, append(args, store.LikePart(f.Search))
	}
	if f.Plan != "" {
		q, args = q+` AND id IN (SELECT user_id FROM user_budgets WHERE plan = ?)`, append(args, f.Plan)
	}
	if f.Group != "" {
		q, args = q+` AND id IN (SELECT user_id FROM user_budgets WHERE budget_group = ?)`, append(args, f.Group)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id LIMIT ?`, append(args, limit)...)
	return collect(rows, err, store.ScanUser, "list users")
}

// SetUserStatus enables or disables a user.
func (s *Store) SetUserStatus(ctx context.Context, userID int64, status string) error {
	if err := store.KnownStatus(status); err != nil {
		return fmt.Errorf("set status of user %d: %w", userID, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE users SET status = ? WHERE id = ?`, status, userID)
	if err != nil {
		return fmt.Errorf("set status of user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("user %d", userID))
}

// SetUserRole changes a user's role.
func (s *Store) SetUserRole(ctx context.Context, userID int64, role string) error {
	if err := store.KnownRole(role); err != nil {
		return fmt.Errorf("set role of user %d: %w", userID, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, role, userID)
	if err != nil {
		return fmt.Errorf("set role of user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("user %d", userID))
}
