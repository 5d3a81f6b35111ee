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

// RegisterUser creates u, as CreateUser does, and credits reward to the
// inviter's invitation quota when u.InvitedBy is set, in one transaction: a
// user is never registered without the inviter's reward, nor rewarded twice.
// An inviter that does not exist is store.ErrNotFound and nothing is created.
func (s *Store) RegisterUser(ctx context.Context, u *store.User, reward int64) error {
	if u.Username == "" {
		return errors.New("register user: empty username")
	}
	if reward < 0 {
		return fmt.Errorf("register user: negative reward %d", reward)
	}
	if u.Role == "" {
		u.Role = store.RoleUser
	}
	if u.Status == "" {
		u.Status = store.UserEnabled
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = now()
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
		res, err := tx.ExecContext(ctx, `INSERT INTO users (username, password_hash, role, status,
			quota, used_quota, request_count, invite_code, invited_by, invitation_quota, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.Username, u.PasswordHash, u.Role, u.Status, u.Quota, u.UsedQuota, u.RequestCount,
			nullString(u.InviteCode), u.InvitedBy, u.InvitationQuota, millis(u.CreatedAt))
		if err != nil {
			return sqlErr(err)
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return fmt.Errorf("register user %q: %w", u.Username, err)
	}
	u.ID = id
	return nil
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
	defer rows.Close()
	users := []*store.User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		users = append(users, u)
	}
	if err := rows.Err(); err != nil {
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
