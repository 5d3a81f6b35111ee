package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
		for _, i := range store.LeaseOrder(reqs) {
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
		balance = store.SubSat(limit, used)
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
	free := store.SubSat(balance, others)
	l.Amount = min(r.Want, free)
	if l.Amount < r.Need {
		l.Amount = 0
	}
	l.Amount = max(l.Amount, r.Keep, 0)
	l.Free = store.SubSat(free, l.Amount)
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
