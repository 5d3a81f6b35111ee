package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-model-gateway/gateway/internal/usernames"
	"github.com/caddy-model-gateway/gateway/store"
)

// CreateUser inserts u and sets its ID, and its CreatedAt if zero. An empty
// Role becomes store.RoleUser and an empty Status "enabled". A taken
// username, one a person would read as a taken one (usernames.Key), or a
// taken invite code is store.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	id, err := insertUser(ctx, s.pool, u)
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Username, err)
	}
	u.ID = id
	return nil
}

// insertUser fills in u's defaults, inserts it and returns its new id.
func insertUser(ctx context.Context, q querier, u *store.User) (int64, error) {
	if err := store.PrepareUser(u, now()); err != nil {
		return 0, err
	}
	var id int64
	err := q.QueryRow(ctx, `INSERT INTO users (username, password_hash, role, status,
		quota, used_quota, request_count, invite_code, invited_by, invitation_quota,
		rpm, tpm, max_parallel, created_at, name_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id`,
		u.Username, u.PasswordHash, u.Role, u.Status, u.Quota, u.UsedQuota, u.RequestCount,
		nullString(u.InviteCode), u.InvitedBy, u.InvitationQuota,
		u.Limits.RPM, u.Limits.TPM, u.Limits.MaxParallel, store.Millis(u.CreatedAt), usernames.Key(u.Username)).Scan(&id)
	if err != nil {
		return 0, sqlErr(err)
	}
	return id, nil
}

// UserByID returns the user with id, or store.ErrNotFound.
func (s *Store) UserByID(ctx context.Context, id int64) (*store.User, error) {
	u, err := store.ScanUser(s.pool.QueryRow(ctx, `SELECT `+store.UserColumns+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("user %d", id))
	}
	return u, nil
}

// UserByName returns the user called username, or store.ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (*store.User, error) {
	u, err := store.ScanUser(s.pool.QueryRow(ctx, `SELECT `+store.UserColumns+` FROM users WHERE username = $1`, username))
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
	u, err := store.ScanUser(s.pool.QueryRow(ctx, `SELECT `+store.UserColumns+` FROM users WHERE invite_code = $1`, code))
	if err != nil {
		return nil, notFound(err, "invite code")
	}
	return u, nil
}

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// UpdatePassword replaces a user's password hash and ends their sessions
// but keepSession, in one transaction.
func (s *Store) UpdatePassword(ctx context.Context, userID int64, hash, keepSession string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, hash, userID)
		if err != nil {
			return fmt.Errorf("update password of user %d: %w", userID, err)
		}
		if err := mustAffect(tag, fmt.Sprintf("user %d", userID)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2`, userID, keepSession); err != nil {
			return fmt.Errorf("end the sessions of user %d: %w", userID, err)
		}
		return nil
	})
}

// AddQuota adds delta, which may be negative, to a user's balance in one
// statement, so concurrent calls from any instance never lose an update.
// A sum beyond a 64-bit integer is refused and changes nothing.
func (s *Store) AddQuota(ctx context.Context, userID int64, delta int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET quota = quota + $1::bigint
		WHERE id = $2 AND quota::numeric + $1::bigint BETWEEN `+minInt64+` AND `+maxInt64,
		delta, userID)
	if err != nil {
		return fmt.Errorf("add quota to user %d: %w", userID, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := s.UserByID(ctx, userID); err != nil {
			return err
		}
		return fmt.Errorf("add %d to the quota of user %d: the balance would overflow", delta, userID)
	}
	return nil
}

// SetUserLimits replaces a user's rate limits.
func (s *Store) SetUserLimits(ctx context.Context, userID int64, l store.Limits) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET rpm = $1, tpm = $2, max_parallel = $3 WHERE id = $4`,
		l.RPM, l.TPM, l.MaxParallel, userID)
	if err != nil {
		return fmt.Errorf("set limits of user %d: %w", userID, err)
	}
	return mustAffect(tag, fmt.Sprintf("user %d", userID))
}

// TransferInvitationQuota moves amount from the user's invitation quota to
// their quota; store.ErrInsufficientQuota when the invitation quota is
// smaller than amount.
func (s *Store) TransferInvitationQuota(ctx context.Context, userID int64, amount int64) error {
	if amount <= 0 {
		return fmt.Errorf("transfer invitation quota: amount must be positive, got %d", amount)
	}
	// The balance check is in the WHERE clause, which PostgreSQL checks
	// again on the row as it is once a concurrent transfer (from any
	// instance) has committed: the check and the move are one step.
	tag, err := s.pool.Exec(ctx, `UPDATE users
		SET invitation_quota = invitation_quota - $1, quota = quota + $1
		WHERE id = $2 AND invitation_quota >= $1`, amount, userID)
	if overflowed(err) {
		return fmt.Errorf("transfer %d from invitation quota of user %d: the balance would overflow", amount, userID)
	}
	if err != nil {
		return fmt.Errorf("transfer invitation quota of user %d: %w", userID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// Nothing moved: tell a missing user from a short balance.
	var have int64
	err = s.pool.QueryRow(ctx, `SELECT invitation_quota FROM users WHERE id = $1`, userID).Scan(&have)
	if err != nil {
		return notFound(err, fmt.Sprintf("user %d", userID))
	}
	return fmt.Errorf("transfer %d from invitation quota %d: %w", amount, have, store.ErrInsufficientQuota)
}

// lockPayer locks a user who is about to pay (their row and their
// inviter's, whom a first payment rewards) for the rest of tx, in id
// order as every multi-row write here does, and returns the user's
// balance. The locks are FOR NO KEY UPDATE, which do not block a
// concurrent insert that merely references the user (a token, a session).
func lockPayer(ctx context.Context, tx pgx.Tx, userID int64) (quota int64, err error) {
	rows, err := tx.Query(ctx, `SELECT id, quota FROM users
		WHERE id = $1 OR id = (SELECT invited_by FROM users WHERE id = $1)
		ORDER BY id FOR NO KEY UPDATE`, userID)
	if err != nil {
		return 0, fmt.Errorf("lock user %d: %w", userID, err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var id, q int64
		if err := rows.Scan(&id, &q); err != nil {
			return 0, fmt.Errorf("lock user %d: %w", userID, err)
		}
		if id == userID {
			quota, found = q, true
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("lock user %d: %w", userID, err)
	}
	if !found {
		return 0, fmt.Errorf("user %d: %w", userID, store.ErrNotFound)
	}
	return quota, nil
}

// credit adds amount to a user locked by lockPayer whose balance is
// quota, refusing a sum past the int64 range.
func credit(ctx context.Context, tx pgx.Tx, userID, quota, amount int64) error {
	if (amount > 0 && quota > math.MaxInt64-amount) || (amount < 0 && quota < math.MinInt64-amount) {
		return fmt.Errorf("add %d to the quota of user %d: the balance would overflow", amount, userID)
	}
	if _, err := tx.Exec(ctx, `UPDATE users SET quota = quota + $1 WHERE id = $2`, amount, userID); err != nil {
		return fmt.Errorf("credit user %d: %w", userID, err)
	}
	return nil
}

// fillNameKeys gives every user without one their usernames.Key: users
// made before the column existed. A user whose key another already has
// (names such as "Root" and "root" taken side by side before) keeps none:
// both go on signing in by their exact names, and the key taken already
// refuses new look-alikes of either. Such rows are looked at again at each
// start and written only when their key has become free, so an up-to-date
// database opens without a write.
func fillNameKeys(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT id, username FROM users WHERE name_key IS NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("users without a name key: %w", err)
	}
	type row struct {
		id   int64
		name string
	}
	missing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.name)
	})
	if err != nil {
		return fmt.Errorf("users without a name key: %w", err)
	}
	// the first user of each key (the oldest) is the one that may hold it
	var ids []int64
	var keys []string
	seen := map[string]bool{}
	for _, r := range missing {
		if k := usernames.Key(r.name); !seen[k] {
			seen[k] = true
			ids, keys = append(ids, r.id), append(keys, k)
		}
	}
	for start := 0; start < len(ids); start += nameKeyBatch {
		end := min(start+nameKeyBatch, len(ids))
		if err := fillNameKeyBatch(ctx, pool, ids[start:end], keys[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// nameKeyBatch is how many users one statement gives their name keys.
const nameKeyBatch = 1000

// fillNameKeyBatch gives each user of ids its key of keys, unless another
// user holds that key already: in one statement, or user by user when a
// signup took a key meanwhile.
func fillNameKeyBatch(ctx context.Context, pool *pgxpool.Pool, ids []int64, keys []string) error {
	rows, err := pool.Query(ctx, `SELECT name_key FROM users WHERE name_key = ANY($1)`, keys)
	if err != nil {
		return fmt.Errorf("taken name keys: %w", err)
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("taken name keys: %w", err)
	}
	held := make(map[string]bool, len(taken))
	for _, k := range taken {
		held[k] = true
	}
	var freeIDs []int64
	var freeKeys []string
	for i, k := range keys {
		if !held[k] {
			freeIDs, freeKeys = append(freeIDs, ids[i]), append(freeKeys, k)
		}
	}
	if len(freeIDs) == 0 {
		return nil // nothing to write: an up-to-date database opens without a write
	}
	const fill = `UPDATE users u SET name_key = v.k FROM unnest($1::bigint[], $2::text[]) AS v(id, k)
		WHERE u.id = v.id AND u.name_key IS NULL`
	_, err = pool.Exec(ctx, fill, freeIDs, freeKeys)
	if err == nil || !errors.Is(sqlErr(err), store.ErrConflict) {
		if err != nil {
			return fmt.Errorf("name keys: %w", err)
		}
		return nil
	}
	// another instance starting, or a signup, took one of the keys first
	for i := range freeIDs {
		_, err := pool.Exec(ctx, fill, freeIDs[i:i+1], freeKeys[i:i+1])
		if err != nil && !errors.Is(sqlErr(err), store.ErrConflict) {
			return fmt.Errorf("name key of user %d: %w", freeIDs[i], err)
		}
	}
	return nil
}
