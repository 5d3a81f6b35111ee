package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// ShareRates writes owner's reports and reads the others' in one
// transaction.
func (s *Store) ShareRates(ctx context.Context, owner string, until time.Time, uses []store.RateUse) ([]store.RateShare, error) {
	if owner == "" {
		return nil, errors.New("share rates: no owner")
	}
	out := make([]store.RateShare, len(uses))
	nowMS := now().UnixMilli()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i, u := range uses {
			kind := 0
			if u.Token {
				kind = 1
			}
			var err error
			if u.Requests == 0 && u.Tokens == 0 && u.Parallel == 0 {
				_, err = tx.ExecContext(ctx, `DELETE FROM rate_use WHERE kind = ? AND key_id = ? AND owner = ?`, kind, u.ID, owner)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO rate_use (kind, key_id, owner, requests, tokens, parallel, expires_at)
					VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key_id, owner) DO UPDATE SET
					requests = excluded.requests, tokens = excluded.tokens, parallel = excluded.parallel,
					expires_at = excluded.expires_at`, kind, u.ID, owner, u.Requests, u.Tokens, u.Parallel, until.UnixMilli())
			}
			if err != nil {
				return err
			}
			r := &out[i]
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0),
				COALESCE(SUM(parallel), 0), COUNT(*), COALESCE(SUM(CASE WHEN owner < ? THEN 1 ELSE 0 END), 0)
				FROM rate_use WHERE kind = ? AND key_id = ? AND owner <> ? AND expires_at > ?`,
				owner, kind, u.ID, owner, nowMS).Scan(&r.Requests, &r.Tokens, &r.Parallel, &r.Owners, &r.Before); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("share rates: %w", err)
	}
	return out, nil
}
