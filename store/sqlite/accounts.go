package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// defaultListLimit is the page size of listings whose filter names none.
const defaultListLimit = 100

// RegisterUser creates u, as CreateUser does, and credits reward to the
// inviter's invitation quota when u.InvitedBy is set, in one transaction: a
// user is never registered without the inviter's reward, nor rewarded twice.
// An inviter that does not exist is store.ErrNotFound and nothing is created.
func (s *Store) RegisterUser(ctx context.Context, u *store.User, reward int64) error {
	if reward < 0 {
		return fmt.Errorf("register user: negative reward %d", reward)
	}
	var id int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if u.InvitedBy != 0 {
			res, err := tx.ExecContext(ctx, `UPDATE users SET invitation_quota = invitation_quota + ?
				WHERE id = ?`, reward, u.InvitedBy)
			if err != nil {
				return fmt.Errorf("reward inviter %d: %w", u.InvitedBy, err)
			}
			if err := mustAffect(res, fmt.Sprintf("inviter %d", u.InvitedBy)); err != nil {
				return err
			}
		}
		var err error
		id, err = insertUser(ctx, tx, u)
		return err
	})
	if err != nil {
		return fmt.Errorf("register user %q: %w", u.Username, err)
	}
	u.ID = id
	return nil
}

// collect scans every row with scan; an empty, non-nil slice when there are
// none, so that listings encode as [] rather than null.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ListUsers returns users with an id above f.AfterID, oldest first, at most
// f.Limit (100 when not positive).
func (s *Store) ListUsers(ctx context.Context, f store.UserFilter) ([]*store.User, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+userColumns+` FROM users WHERE id > ?
		ORDER BY id LIMIT ?`, f.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	users, err := collect(rows, scanUser)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return users, nil
}

// SetUserStatus enables or disables a user.
func (s *Store) SetUserStatus(ctx context.Context, userID int64, status string) error {
	if status != store.UserEnabled && status != store.UserDisabled {
		return fmt.Errorf("set status of user %d: unknown status %q", userID, status)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE users SET status = ? WHERE id = ?`, status, userID)
	if err != nil {
		return fmt.Errorf("set status of user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("user %d", userID))
}

// SetUserRole changes a user's role.
func (s *Store) SetUserRole(ctx context.Context, userID int64, role string) error {
	switch role {
	case store.RoleUser, store.RoleAdmin, store.RoleRoot:
	default:
		return fmt.Errorf("set role of user %d: unknown role %q", userID, role)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, role, userID)
	if err != nil {
		return fmt.Errorf("set role of user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("user %d", userID))
}
