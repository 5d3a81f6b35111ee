package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// ShareRates writes owner's reports and reads the others' in one
// transaction. Reports are estimates by nature, so nothing is locked: a
// report committed meanwhile is read at the next sync.
func (s *Store) ShareRates(ctx context.Context, owner string, until time.Time, uses []store.RateUse) ([]store.RateShare, error) {
	if owner == "" {
		return nil, errors.New("share rates: no owner")
	}
	out := make([]store.RateShare, len(uses))
	nowMS := now().UnixMilli()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for i, u := range uses {
			kind := int16(0)
			if u.Token {
				kind = 1
			}
			var err error
			if u.Requests == 0 && u.Tokens == 0 && u.Parallel == 0 {
				_, err = tx.Exec(ctx, `DELETE FROM rate_use WHERE kind = $1 AND key_id = $2 AND owner = $3`, kind, u.ID, owner)
			} else {
				_, err = tx.Exec(ctx, `INSERT INTO rate_use (kind, key_id, owner, requests, tokens, parallel, expires_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, key_id, owner) DO UPDATE SET
					requests = excluded.requests, tokens = excluded.tokens, parallel = excluded.parallel,
					expires_at = excluded.expires_at`, kind, u.ID, owner, u.Requests, u.Tokens, u.Parallel, until.UnixMilli())
			}
			if err != nil {
				return err
			}
			r := &out[i]
			if err := tx.QueryRow(ctx, `SELECT COALESCE(SUM(requests), 0)::bigint, COALESCE(SUM(tokens), 0)::bigint,
				COALESCE(SUM(parallel), 0)::bigint, COUNT(*), COUNT(*) FILTER (WHERE owner < $3)
				FROM rate_use WHERE kind = $1 AND key_id = $2 AND owner <> $3 AND expires_at > $4`,
				kind, u.ID, owner, nowMS).Scan(&r.Requests, &r.Tokens, &r.Parallel, &r.Owners, &r.Before); err != nil {
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
