package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateRedemptionCodes inserts every code in one transaction, setting each
// one's ID and, if zero, CreatedAt. A code already stored is
// store.ErrConflict and none of the batch is kept.
func (s *Store) CreateRedemptionCodes(ctx context.Context, codes []*store.RedemptionCode) error {
	for i, c := range codes {
		switch {
		case c == nil:
			return fmt.Errorf("create redemption codes: code %d is nil", i)
		case c.Code == "":
			return fmt.Errorf("create redemption codes: code %d is empty", i)
		case c.Quota <= 0:
			return fmt.Errorf("create redemption codes: code %d: quota must be positive, got %d", i, c.Quota)
		}
	}
	ts := now()
	ids := make([]int64, len(codes))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO redemption_codes
			(code, quota, used_by, created_at, redeemed_at) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i, c := range codes {
			createdAt := c.CreatedAt
			if createdAt.IsZero() {
				createdAt = ts
			}
			res, err := ins.ExecContext(ctx, c.Code, c.Quota, c.UsedBy, createdAt.UnixMilli(), millis(c.RedeemedAt))
			if err != nil {
				return fmt.Errorf("code %d: %w", i, sqlErr(err))
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return fmt.Errorf("code %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create redemption codes: %w", err)
	}
	for i, c := range codes {
		c.ID = ids[i]
		if c.CreatedAt.IsZero() {
			c.CreatedAt = ts
		}
	}
	return nil
}

// Redeem marks code used by userID and credits its quota to that user, in
// one transaction, and returns the amount credited. store.ErrNotFound when
// the code does not exist, was used already, or the user does not exist.
func (s *Store) Redeem(ctx context.Context, code string, userID int64) (int64, error) {
	if code == "" {
		return 0, fmt.Errorf("redeem: empty code: %w", store.ErrNotFound)
	}
	if userID <= 0 {
		// used_by = 0 means unused, so user 0 could redeem a code forever.
		return 0, fmt.Errorf("redeem: invalid user id %d", userID)
	}
	var quota int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Claiming the code is conditional on it being unused, so of two
		// concurrent redemptions exactly one gets a row back.
		err := tx.QueryRowContext(ctx, `UPDATE redemption_codes SET used_by = ?, redeemed_at = ?
			WHERE code = ? AND used_by = 0 RETURNING quota`,
			userID, now().UnixMilli(), code).Scan(&quota)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("code missing or already used: %w", store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE users SET quota = quota + ? WHERE id = ?`, quota, userID)
		if err != nil {
			return fmt.Errorf("credit user %d: %w", userID, err)
		}
		return mustAffect(res, fmt.Sprintf("user %d", userID))
	})
	if err != nil {
		return 0, fmt.Errorf("redeem: %w", err)
	}
	return quota, nil
}
