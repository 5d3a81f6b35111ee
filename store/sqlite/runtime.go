package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// ListRuntime implements store.RuntimeStore.
func (s *Store) ListRuntime(ctx context.Context, kind string) ([]*store.RuntimeItem, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.RuntimeColumns+` FROM runtime_config
		WHERE ? = '' OR kind = ? ORDER BY kind, name`, kind, kind)
	return collect(rows, err, store.ScanRuntime, "list runtime configuration")
}

// PutRuntime implements store.RuntimeStore.
func (s *Store) PutRuntime(ctx context.Context, it *store.RuntimeItem, replace bool) error {
	if err := store.PrepareRuntime(it, now()); err != nil {
		return err
	}
	if !replace {
		_, err := s.w.ExecContext(ctx, `INSERT INTO runtime_config (`+store.RuntimeColumns+`) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)`,
			it.Kind, it.Name, it.Config, it.Secret, it.KeyPrefix, boolInt(it.Disabled), it.CreatedAt.UnixMilli(), it.UpdatedAt.UnixMilli())
		if err != nil {
			return fmt.Errorf("create %s %q: %w", it.Kind, it.Name, sqlErr(err))
		}
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var created int64
		if err := tx.QueryRowContext(ctx, `SELECT created_at FROM runtime_config WHERE kind = ? AND name = ?`, it.Kind, it.Name).Scan(&created); err != nil {
			return notFound(err, it.Kind+" "+it.Name)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runtime_config SET config = ?, secret = ?, key_prefix = ?, disabled = ?, updated_at = ?
			WHERE kind = ? AND name = ?`, it.Config, it.Secret, it.KeyPrefix, boolInt(it.Disabled), it.UpdatedAt.UnixMilli(), it.Kind, it.Name); err != nil {
			return fmt.Errorf("update %s %q: %w", it.Kind, it.Name, err)
		}
		it.CreatedAt = store.FromMillisOrZero(created)
		return nil
	})
}

// DeleteRuntime implements store.RuntimeStore.
func (s *Store) DeleteRuntime(ctx context.Context, kind, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM runtime_config WHERE kind = ? AND name = ?`, kind, name)
	return oneRow(res, err, kind+" "+name)
}

// SetRuntimeTest implements store.RuntimeStore.
func (s *Store) SetRuntimeTest(ctx context.Context, kind, name, test string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE runtime_config SET test = ? WHERE kind = ? AND name = ?`, test, kind, name)
	return oneRow(res, err, kind+" "+name)
}

// ResealSecrets implements store.RuntimeStore.
func (s *Store) ResealSecrets(ctx context.Context, r store.Resealers) (store.ResealCounts, error) {
	var n store.ResealCounts
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n = store.ResealCounts{}
		if r.Runtime != nil {
			rows, err := tx.QueryContext(ctx, `SELECT `+store.RuntimeColumns+` FROM runtime_config WHERE secret IS NOT NULL AND length(secret) > 0`)
			items, err := collect(rows, err, store.ScanRuntime, "reseal runtime secrets")
			if err != nil {
				return err
			}
			for _, it := range items {
				sealed, err := r.Runtime(it)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE runtime_config SET secret = ? WHERE kind = ? AND name = ?`, sealed, it.Kind, it.Name); err != nil {
					return fmt.Errorf("reseal %s %q: %w", it.Kind, it.Name, err)
				}
				n.Runtime++
			}
		}
		if r.TOTP == nil {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+store.TOTPColumns+` FROM totp_secrets ORDER BY user_id`)
		secrets, err := collect(rows, err, store.ScanTOTP, "reseal totp secrets")
		if err != nil {
			return err
		}
		for _, t := range secrets {
			secret, err := r.TOTP(t.UserID, t.Secret)
			if err != nil {
				return err
			}
			if secret == t.Secret {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE totp_secrets SET secret = ? WHERE user_id = ?`, secret, t.UserID); err != nil {
				return fmt.Errorf("reseal totp of user %d: %w", t.UserID, err)
			}
			n.TOTP++
		}
		return nil
	})
	if err != nil {
		return store.ResealCounts{}, err
	}
	return n, nil
}

// oneRow turns an update or delete that touched no row into ErrNotFound.
func oneRow(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}
