package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateSession stores a session, setting CreatedAt if zero. ExpiresAt is
// required: a session that never ends is a bug, not a choice. Sessions that
// have expired are deleted on the way, so no background sweeper is needed.
func (s *Store) CreateSession(ctx context.Context, sess *store.Session) error {
	ts := now()
	if err := store.PrepareSession(sess, ts); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, ts.UnixMilli()); err != nil {
			return fmt.Errorf("create session: delete expired: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id_hash, user_id, expires_at, created_at)
			VALUES (?, ?, ?, ?)`, sess.IDHash, sess.UserID, store.Millis(sess.ExpiresAt), store.Millis(sess.CreatedAt)); err != nil {
			return fmt.Errorf("create session for user %d: %w", sess.UserID, sqlErr(err))
		}
		return nil
	})
}

// SessionByHash returns the session with idHash. An expired session is
// store.ErrNotFound like a missing one, so a caller that forgets to check
// the expiry still cannot let an old cookie in.
func (s *Store) SessionByHash(ctx context.Context, idHash string) (*store.Session, error) {
	sess, err := store.ScanSession(s.r.QueryRowContext(ctx, `SELECT `+store.SessionColumns+`
		FROM sessions WHERE id_hash = ? AND expires_at > ?`, idHash, now().UnixMilli()))
	if err != nil {
		// Never the hash in the message: it identifies a live cookie.
		return nil, notFound(err, "session")
	}
	return sess, nil
}

// DeleteSession removes a session. Deleting one that is already gone is not
// an error: logging out twice should succeed.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM sessions WHERE id_hash = ?`, idHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// TouchSession moves a live session's expiry; store.ErrNotFound when the
// session is gone or has already expired.
func (s *Store) TouchSession(ctx context.Context, idHash string, expiresAt time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET expires_at = ?
		WHERE id_hash = ? AND expires_at > ?`, store.Millis(expiresAt), idHash, now().UnixMilli())
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return mustAffect(res, "session")
}

// DeleteUserSessions removes every session of a user.
func (s *Store) DeleteUserSessions(ctx context.Context, userID int64) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
		return fmt.Errorf("delete sessions of user %d: %w", userID, err)
	}
	return nil
}
