package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
		// each key's reports are written and read one instance at a
		// time, so that of two instances claiming a key at once the
		// second reads the first's claim (billing/ratesharing.go); the
		// keys are locked in one order, so two syncs wait rather than
		// deadlock
		kinds, ids := rateLocks(uses)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k, i) FROM unnest($1::int[], $2::int[]) AS t(k, i)`, kinds, ids); err != nil {
			return err
		}
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

// rateLockSpace tags the advisory locks of rate reports ("rate"), in the
// two-key space, apart from the gateway's one-key locks.
const rateLockSpace int32 = 0x72617465

// rateLocks are the advisory lock keys of uses' keys, sorted and distinct:
// a key's id beyond 32 bits shares a lock with another, which only makes
// one wait for the other.
func rateLocks(uses []store.RateUse) (kinds, ids []int32) {
	type lock struct{ kind, id int32 }
	locks := make([]lock, 0, len(uses))
	for _, u := range uses {
		l := lock{rateLockSpace, int32(u.ID)}
		if u.Token {
			l.kind++
		}
		locks = append(locks, l)
	}
	slices.SortFunc(locks, func(a, b lock) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.id, b.id)) })
	locks = slices.Compact(locks)
	for _, l := range locks {
		kinds, ids = append(kinds, l.kind), append(ids, l.id)
	}
	return kinds, ids
}
