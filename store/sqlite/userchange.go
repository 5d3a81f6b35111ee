package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// UpdateUser applies an administrator's change to a user in one
// transaction: status, role, quota, limits and the ending of sessions
// are all made or none is.
func (s *Store) UpdateUser(ctx context.Context, userID int64, c store.UserChange) (*store.User, error) {
	if err := store.CheckUserChange(userID, c); err != nil {
		return nil, err
	}
	var u *store.User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var quota int64
		if err := tx.QueryRowContext(ctx, `SELECT quota FROM users WHERE id = ?`, userID).Scan(&quota); err != nil {
			return notFound(err, fmt.Sprintf("user %d", userID))
		}
		if c.Status != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE users SET status = ? WHERE id = ?`, *c.Status, userID); err != nil {
				return fmt.Errorf("set status: %w", err)
			}
		}
		if c.Role != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, *c.Role, userID); err != nil {
				return fmt.Errorf("set role: %w", err)
			}
		}
		if c.QuotaDelta != 0 {
			// the balance read above is this transaction's: the writer
			// holds the write lock from BEGIN, so no settlement slips in
			if quota+c.QuotaDelta < 0 {
				return fmt.Errorf("add %d to a balance of %d: %w", c.QuotaDelta, quota, store.ErrInsufficientQuota)
			}
			res, err := tx.ExecContext(ctx, `UPDATE users SET quota = quota + ?
				WHERE id = ? AND typeof(quota + ?) = 'integer'`, c.QuotaDelta, userID, c.QuotaDelta)
			if err != nil {
				return fmt.Errorf("add quota: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				if err != nil {
					return err
				}
				return fmt.Errorf("add %d to the quota: the balance would overflow", c.QuotaDelta)
			}
			if c.QuotaDelta > 0 {
				if err := payInvitationReward(ctx, tx, userID, c.QuotaDelta, false); err != nil {
					return err
				}
			}
		}
		if l := c.Limits; l != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE users SET rpm = ?, tpm = ?, max_parallel = ? WHERE id = ?`,
				l.RPM, l.TPM, l.MaxParallel, userID); err != nil {
				return fmt.Errorf("set limits: %w", err)
			}
		}
		if c.EndSessions {
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
				return fmt.Errorf("end sessions: %w", err)
			}
		}
		var err error
		u, err = store.ScanUser(tx.QueryRowContext(ctx, `SELECT `+store.UserColumns+` FROM users WHERE id = ?`, userID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update user %d: %w", userID, err)
	}
	return u, nil
}
