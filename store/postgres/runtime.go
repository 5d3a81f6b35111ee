package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddy-model-gateway/gateway/store"
)

// ListRuntime implements store.RuntimeStore.
func (s *Store) ListRuntime(ctx context.Context, kind string) ([]*store.RuntimeItem, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+store.RuntimeColumns+` FROM runtime_config
		WHERE $1 = '' OR kind = $1 ORDER BY kind, name`, kind)
	return collect(rows, err, store.ScanRuntime, "list runtime configuration")
}

// PutRuntime implements store.RuntimeStore. Its commit is announced to
// every instance (migration 0018's trigger).
func (s *Store) PutRuntime(ctx context.Context, it *store.RuntimeItem, replace bool) error {
	if err := store.PrepareRuntime(it, now()); err != nil {
		return err
	}
	disabled := int64(0)
	if it.Disabled {
		disabled = 1
	}
	if !replace {
		_, err := s.pool.Exec(ctx, `INSERT INTO runtime_config (`+store.RuntimeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, '', $7, $8)`,
			it.Kind, it.Name, it.Config, it.Secret, it.KeyPrefix, disabled, it.CreatedAt.UnixMilli(), it.UpdatedAt.UnixMilli())
		if err != nil {
			return fmt.Errorf("create %s %q: %w", it.Kind, it.Name, sqlErr(err))
		}
		return nil
	}
	var created int64
	err := s.pool.QueryRow(ctx, `UPDATE runtime_config SET config = $3, secret = $4, key_prefix = $5, disabled = $6, updated_at = $7
		WHERE kind = $1 AND name = $2 RETURNING created_at`, it.Kind, it.Name, it.Config, it.Secret, it.KeyPrefix, disabled, it.UpdatedAt.UnixMilli()).Scan(&created)
	if err != nil {
		return notFound(err, it.Kind+" "+it.Name)
	}
	it.CreatedAt = store.FromMillisOrZero(created)
	return nil
}

// DeleteRuntime implements store.RuntimeStore.
func (s *Store) DeleteRuntime(ctx context.Context, kind, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runtime_config WHERE kind = $1 AND name = $2`, kind, name)
	return oneRow(tag, err, kind+" "+name)
}

// SetRuntimeTest implements store.RuntimeStore.
func (s *Store) SetRuntimeTest(ctx context.Context, kind, name, test string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runtime_config SET test = $3 WHERE kind = $1 AND name = $2`, kind, name, test)
	return oneRow(tag, err, kind+" "+name)
}

// ResealSecrets implements store.RuntimeStore.
func (s *Store) ResealSecrets(ctx context.Context, r store.Resealers) (store.ResealCounts, error) {
	var n store.ResealCounts
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = store.ResealCounts{}
		if r.Runtime != nil {
			// FOR UPDATE: a key written meanwhile waits, and is not lost under the old key
			rows, err := tx.Query(ctx, `SELECT `+store.RuntimeColumns+` FROM runtime_config
				WHERE secret IS NOT NULL AND length(secret) > 0 FOR UPDATE`)
			items, err := collect(rows, err, store.ScanRuntime, "reseal runtime secrets")
			if err != nil {
				return err
			}
			for _, it := range items {
				sealed, err := r.Runtime(it)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE runtime_config SET secret = $3 WHERE kind = $1 AND name = $2`, it.Kind, it.Name, sealed); err != nil {
					return fmt.Errorf("reseal %s %q: %w", it.Kind, it.Name, err)
				}
				n.Runtime++
			}
		}
		if r.TOTP == nil {
			return nil
		}
		// FOR UPDATE too: an enrolment meanwhile waits, rather than keep a
		// secret sealed with the old key
		rows, err := tx.Query(ctx, `SELECT `+store.TOTPColumns+` FROM totp_secrets ORDER BY user_id FOR UPDATE`)
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
			if _, err := tx.Exec(ctx, `UPDATE totp_secrets SET secret = $1 WHERE user_id = $2`, secret, t.UserID); err != nil {
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
func oneRow(tag pgconn.CommandTag, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}
