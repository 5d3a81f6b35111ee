package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// LeaseBalances sets owner's leases in one transaction. Each account's row
// is locked (FOR UPDATE) before its leases are summed, so instances leasing
// one balance at once take turns and never both get the same free part;
// accounts are locked users by id, then tokens by id, the order
// SettleBatch locks them in, so a lease and a batch never deadlock.
func (s *Store) LeaseBalances(ctx context.Context, owner string, until time.Time, reqs []store.LeaseRequest) ([]store.Lease, error) {
	if owner == "" {
		return nil, errors.New("lease balances: no owner")
	}
	out := make([]store.Lease, len(reqs))
	nowMS := now().UnixMilli()
	order := store.LeaseOrder(reqs)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, i := range order {
			l, err := leaseOne(ctx, tx, owner, nowMS, until.UnixMilli(), reqs[i])
			if err != nil {
				return err
			}
			out[i] = l
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease balances: %w", err)
	}
	return out, nil
}

func leaseKind(a store.LeaseAccount) int16 {
	if a.Token {
		return 1
	}
	return 0
}

// lockUser and lockToken lock the account's row. The balance and the
// other leases are read by the next statement: under READ COMMITTED a
// statement sees what committed before it began, so reading them in the
// statement that waited for the lock would see leases granted meanwhile
// as they were before.
const (
	lockUser    = `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`
	lockToken   = `SELECT 1 FROM tokens WHERE id = $1 AND quota_limit > 0 FOR UPDATE`
	userBalance = `SELECT u.quota::numeric, COALESCE((SELECT SUM(amount) FROM balance_leases
		WHERE kind = 0 AND account_id = u.id AND owner <> $2 AND expires_at > $3), 0)
		FROM users u WHERE u.id = $1`
	tokenBalance = `SELECT t.quota_limit::numeric - t.used_quota, COALESCE((SELECT SUM(amount) FROM balance_leases
		WHERE kind = 1 AND account_id = t.id AND owner <> $2 AND expires_at > $3), 0)
		FROM tokens t WHERE t.id = $1`
)

func leaseOne(ctx context.Context, tx pgx.Tx, owner string, nowMS, untilMS int64, r store.LeaseRequest) (store.Lease, error) {
	l := store.Lease{Account: r.Account}
	lock, q := lockUser, userBalance
	if r.Account.Token {
		lock, q = lockToken, tokenBalance
	}
	kind := leaseKind(r.Account)
	var one int
	err := tx.QueryRow(ctx, lock, r.Account.ID).Scan(&one)
	// numeric, clamped to the int64 range: no absurd balance wraps
	var balance, free int64
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT GREATEST(LEAST(bal, `+maxInt64+`), `+minInt64+`)::bigint,
			GREATEST(LEAST(bal - oth, `+maxInt64+`), `+minInt64+`)::bigint FROM (`+q+`) AS b(bal, oth)`,
			r.Account.ID, owner, nowMS).Scan(&balance, &free)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = tx.Exec(ctx, `DELETE FROM balance_leases WHERE kind = $1 AND account_id = $2 AND owner = $3`, kind, r.Account.ID, owner)
		return l, err
	}
	if err != nil {
		return l, err
	}
	l.Amount = min(r.Want, free)
	if l.Amount < r.Need {
		l.Amount = 0
	}
	l.Amount = max(l.Amount, r.Keep, 0)
	l.Free = store.SubSat(free, l.Amount)
	l.Balance = balance
	if l.Amount == 0 {
		_, err = tx.Exec(ctx, `DELETE FROM balance_leases WHERE kind = $1 AND account_id = $2 AND owner = $3`, kind, r.Account.ID, owner)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO balance_leases (kind, account_id, owner, amount, expires_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, account_id, owner)
			DO UPDATE SET amount = excluded.amount, expires_at = excluded.expires_at`,
			kind, r.Account.ID, owner, l.Amount, untilMS)
	}
	return l, err
}

// DropExpiredLeases deletes the leases that ran out before now.
func (s *Store) DropExpiredLeases(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM balance_leases WHERE expires_at <= $1`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("drop expired leases: %w", err)
	}
	return tag.RowsAffected(), nil
}
