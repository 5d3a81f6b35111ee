package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// LeaseBalances sets owner's leases in one write transaction (the write
// lock is taken at BEGIN, so no other lease or charge slips between the
// balance read and the lease written).
func (s *Store) LeaseBalances(ctx context.Context, owner string, until time.Time, reqs []store.LeaseRequest) ([]store.Lease, error) {
	if owner == "" {
		return nil, errors.New("lease balances: no owner")
	}
	out := make([]store.Lease, len(reqs))
	nowMS := now().UnixMilli()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, i := range leaseOrder(reqs) {
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

// leaseOrder is the order requests are applied in: users by id, then
// tokens by id, the order SettleBatch charges them in.
func leaseOrder(reqs []store.LeaseRequest) []int {
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := reqs[a].Account, reqs[b].Account
		if x.Token != y.Token {
			if x.Token {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return idx
}

func leaseKind(a store.LeaseAccount) int {
	if a.Token {
		return 1
	}
	return 0
}

func leaseOne(ctx context.Context, tx *sql.Tx, owner string, nowMS, untilMS int64, r store.LeaseRequest) (store.Lease, error) {
	l := store.Lease{Account: r.Account}
	var balance int64
	var err error
	if r.Account.Token {
		var limit, used int64
		err = tx.QueryRowContext(ctx, `SELECT quota_limit, used_quota FROM tokens WHERE id = ?`, r.Account.ID).Scan(&limit, &used)
		if err == nil && limit <= 0 {
			err = sql.ErrNoRows // no limit of its own: nothing to lease
		}
		balance = subSat(limit, used)
	} else {
		err = tx.QueryRowContext(ctx, `SELECT quota FROM users WHERE id = ?`, r.Account.ID).Scan(&balance)
	}
	kind := leaseKind(r.Account)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = tx.ExecContext(ctx, `DELETE FROM balance_leases WHERE kind = ? AND account_id = ? AND owner = ?`, kind, r.Account.ID, owner)
		return l, err
	}
	if err != nil {
		return l, err
	}
	var others int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(amount), 0) FROM balance_leases
		WHERE kind = ? AND account_id = ? AND owner <> ? AND expires_at > ?`,
		kind, r.Account.ID, owner, nowMS).Scan(&others); err != nil {
		return l, err
	}
	free := subSat(balance, others)
	l.Amount = min(r.Want, free)
	if l.Amount < r.Need {
		l.Amount = 0
	}
	l.Amount = max(l.Amount, r.Keep, 0)
	l.Free = subSat(free, l.Amount)
	l.Balance = balance
	if l.Amount == 0 {
		_, err = tx.ExecContext(ctx, `DELETE FROM balance_leases WHERE kind = ? AND account_id = ? AND owner = ?`, kind, r.Account.ID, owner)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO balance_leases (kind, account_id, owner, amount, expires_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, account_id, owner)
			DO UPDATE SET amount = excluded.amount, expires_at = excluded.expires_at`,
			kind, r.Account.ID, owner, l.Amount, untilMS)
	}
	return l, err
}

// DropExpiredLeases deletes the leases that ran out before now.
func (s *Store) DropExpiredLeases(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM balance_leases WHERE expires_at <= ?`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("drop expired leases: %w", err)
	}
	return res.RowsAffected()
}

// subSat is a - b saturating at the int64 range, so that no absurd
// balance or lease wraps into a grant.
func subSat(a, b int64) int64 {
	c := a - b
	if (c < a) != (b > 0) {
		if b > 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return c
}
