package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/caddy-model-gateway/gateway/internal/usernames"
	"github.com/caddy-model-gateway/gateway/store"
)

// CreateUser inserts u and sets its ID, and its CreatedAt if zero. An empty
// Role becomes store.RoleUser and an empty Status "enabled". A taken
// username, one a person would read as a taken one (usernames.Key), or a
// taken invite code is store.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	id, err := insertUser(ctx, s.w, u)
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Username, err)
	}
	u.ID = id
	return nil
}

// insertUser fills in u's defaults, inserts it and returns its new id.
func insertUser(ctx context.Context, ex execer, u *store.User) (int64, error) {
	if err := store.PrepareUser(u, now()); err != nil {
		return 0, err
	}
	res, err := ex.ExecContext(ctx, `INSERT INTO users (username, password_hash, role, status,
		quota, used_quota, request_count, invite_code, invited_by, invitation_quota,
		rpm, tpm, max_parallel, created_at, name_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.Username, u.PasswordHash, u.Role, u.Status, u.Quota, u.UsedQuota, u.RequestCount,
		nullString(u.InviteCode), u.InvitedBy, u.InvitationQuota,
		u.Limits.RPM, u.Limits.TPM, u.Limits.MaxParallel, store.Millis(u.CreatedAt), usernames.Key(u.Username))
	if err != nil {
		return 0, sqlErr(err)
	}
	return res.LastInsertId()
}

// UserByID returns the user with id, or store.ErrNotFound.
func (s *Store) UserByID(ctx context.Context, id int64) (*store.User, error) {
	u, err := store.ScanUser(s.r.QueryRowContext(ctx,
		`SELECT `+store.UserColumns+` FROM users WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("user %d", id))
	}
	return u, nil
}

// UserByName returns the user called username, or store.ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (*store.User, error) {
	u, err := store.ScanUser(s.r.QueryRowContext(ctx,
		`SELECT `+store.UserColumns+` FROM users WHERE username = ?`, username))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("user %q", username))
	}
	return u, nil
}

// UserByInviteCode returns the user whose own invite code is code, or
// store.ErrNotFound (always, for the empty code).
func (s *Store) UserByInviteCode(ctx context.Context, code string) (*store.User, error) {
	if code == "" {
		return nil, fmt.Errorf("empty invite code: %w", store.ErrNotFound)
	}
	u, err := store.ScanUser(s.r.QueryRowContext(ctx,
		`SELECT `+store.UserColumns+` FROM users WHERE invite_code = ?`, code))
	if err != nil {
		return nil, notFound(err, "invite code")
	}
	return u, nil
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// UpdatePassword replaces a user's password hash and ends their sessions
// but keepSession, in one transaction.
func (s *Store) UpdatePassword(ctx context.Context, userID int64, hash, keepSession string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, userID)
		if err != nil {
			return fmt.Errorf("update password of user %d: %w", userID, err)
		}
		if err := mustAffect(res, fmt.Sprintf("user %d", userID)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?`, userID, keepSession); err != nil {
			return fmt.Errorf("end the sessions of user %d: %w", userID, err)
		}
		return nil
	})
}

// AddQuota adds delta, which may be negative, to a user's balance in one
// statement, so concurrent calls never lose an update. A sum beyond a 64-bit
// integer is refused: SQLite would store it as a REAL, which no later read
// into an int64 could take.
func (s *Store) AddQuota(ctx context.Context, userID int64, delta int64) error {
	res, err := s.w.ExecContext(ctx, `UPDATE users SET quota = quota + ?
		WHERE id = ? AND typeof(quota + ?) = 'integer'`, delta, userID, delta)
	if err != nil {
		return fmt.Errorf("add quota to user %d: %w", userID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		if _, err := s.UserByID(ctx, userID); err != nil {
			return err
		}
		return fmt.Errorf("add %d to the quota of user %d: the balance would overflow", delta, userID)
	}
	return err
}

// SetUserLimits replaces a user's rate limits.
func (s *Store) SetUserLimits(ctx context.Context, userID int64, l store.Limits) error {
	res, err := s.w.ExecContext(ctx, `UPDATE users SET rpm = ?, tpm = ?, max_parallel = ? WHERE id = ?`,
		l.RPM, l.TPM, l.MaxParallel, userID)
	if err != nil {
		return fmt.Errorf("set limits of user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("user %d", userID))
}

// TransferInvitationQuota moves amount from the user's invitation quota to
// their quota; store.ErrInsufficientQuota when the invitation quota is
// smaller than amount.
func (s *Store) TransferInvitationQuota(ctx context.Context, userID int64, amount int64) error {
	if amount <= 0 {
		return fmt.Errorf("transfer invitation quota: amount must be positive, got %d", amount)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// The balance check is in the WHERE clause, so it and the move are
		// one step no concurrent transfer can slip between.
		res, err := tx.ExecContext(ctx, `UPDATE users
			SET invitation_quota = invitation_quota - ?, quota = quota + ?
			WHERE id = ? AND invitation_quota >= ?`, amount, amount, userID, amount)
		if err != nil {
			return fmt.Errorf("transfer invitation quota of user %d: %w", userID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		// Nothing moved: tell a missing user from a short balance.
		var have int64
		err = tx.QueryRowContext(ctx, `SELECT invitation_quota FROM users WHERE id = ?`, userID).Scan(&have)
		if err != nil {
			return notFound(err, fmt.Sprintf("user %d", userID))
		}
		return fmt.Errorf("transfer %d from invitation quota %d: %w", amount, have, store.ErrInsufficientQuota)
	})
}

// fillNameKeys gives every user without one their usernames.Key: users
// made before the column existed. A user whose key another already has
// (names such as "Root" and "root" taken side by side before) keeps none:
// both go on signing in by their exact names, and the key taken already
// refuses new look-alikes of either. Such rows are looked at again at each
// open, and written only when their key has become free.
func fillNameKeys(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT id, username FROM users WHERE name_key IS NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("users without a name key: %w", err)
	}
	type row struct {
		id   int64
		name string
	}
	var missing []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.name); err != nil {
			rows.Close()
			return fmt.Errorf("users without a name key: %w", err)
		}
		missing = append(missing, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("users without a name key: %w", err)
	}
	for _, r := range missing {
		key := usernames.Key(r.name)
		var taken bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE name_key = ?)`, key).Scan(&taken); err != nil {
			return fmt.Errorf("name key of user %d: %w", r.id, err)
		}
		if taken {
			continue
		}
		_, err := db.ExecContext(ctx, `UPDATE users SET name_key = ? WHERE id = ? AND name_key IS NULL`, key, r.id)
		if err != nil && !errors.Is(sqlErr(err), store.ErrConflict) {
			return fmt.Errorf("name key of user %d: %w", r.id, err)
		}
	}
	return nil
}
