package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateRedemptionCodes inserts every code in one transaction, setting each
// one's ID and, if zero, CreatedAt. A code already stored is
// store.ErrConflict and none of the batch is kept.
func (s *Store) CreateRedemptionCodes(ctx context.Context, codes []*store.RedemptionCode) error {
	if err := store.CheckCodes(codes); err != nil {
		return err
	}
	ts := now()
	ids := make([]int64, len(codes))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO redemption_codes
			(code, quota, status, used_by, created_at, redeemed_at, expires_at, name, plan, plan_days)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i, c := range codes {
			createdAt := c.CreatedAt
			if createdAt.IsZero() {
				createdAt = ts
			}
			if c.Status == "" {
				c.Status = store.CodeEnabled
			}
			res, err := ins.ExecContext(ctx, c.Code, c.Quota, c.Status, c.UsedBy, createdAt.UnixMilli(),
				store.Millis(c.RedeemedAt), store.Millis(c.ExpiresAt), c.Name, c.Plan, c.PlanDays)
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
	store.CreatedCodes(codes, ids, ts)
	return nil
}

// Redeem marks code used by userID and credits its quota to that user, and
// on the user's first payment their inviter's reward, in one transaction,
// and returns the amount credited. store.ErrNotFound when
// the code does not exist, was used already, is disabled or expired, or the
// user does not exist: the caller cannot tell which, and need not.
func (s *Store) Redeem(ctx context.Context, code string, userID int64) (int64, error) {
	if err := store.CheckRedeem(code, userID); err != nil {
		return 0, err
	}
	var (
		quota int64
		plan  string
		days  int64
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Claiming the code is conditional on it being unused, so of two
		// concurrent redemptions exactly one gets a row back.
		ts := now().UnixMilli()
		err := tx.QueryRowContext(ctx, `UPDATE redemption_codes SET used_by = ?, redeemed_at = ?
			WHERE code = ? AND used_by = 0 AND status = ? AND (expires_at IS NULL OR expires_at > ?)
			RETURNING quota, plan, plan_days`,
			userID, ts, code, store.CodeEnabled, ts).Scan(&quota, &plan, &days)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("code missing, used, disabled or expired: %w", store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := credit(ctx, tx, userID, quota); err != nil {
			return err
		}
		if err := grantPlan(ctx, tx, userID, plan, days, ts); err != nil {
			return err
		}
		return payInvitationReward(ctx, tx, userID, quota, plan != "")
	})
	if err != nil {
		return 0, fmt.Errorf("redeem: %w", err)
	}
	return quota, nil
}

// ListRedemptionCodes returns codes newest first, those with an id below
// f.BeforeID when it is set, at most f.Limit (100 when not positive).
func (s *Store) ListRedemptionCodes(ctx context.Context, f store.CodeFilter) ([]*store.RedemptionCode, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	before := f.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	q, args := `SELECT `+store.CodeColumns+` FROM redemption_codes WHERE id < ?`, []any{before}
	if f.Name != "" {
		q, args = q+` AND name = ?`, append(args, f.Name)
	}
	if f.Search != "" {
		q += ` AND (name LIKE ? ESCAPE '\' OR code LIKE ? ESCAPE '\')`
		args = append(args, store.LikePart(f.Search), store.LikePart(f.Search))
	}
	if f.UsedBy != 0 {
		q, args = q+` AND used_by = ?`, append(args, f.UsedBy)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	return collect(rows, err, store.ScanCode, "list redemption codes")
}

// SetRedemptionCodeStatus enables or disables a code.
func (s *Store) SetRedemptionCodeStatus(ctx context.Context, id int64, status string) error {
	if status != store.CodeEnabled && status != store.CodeDisabled {
		return fmt.Errorf("set status of code %d: unknown status %q", id, status)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE redemption_codes SET status = ? WHERE id = ?`, status, id)
	if err != nil {
		return fmt.Errorf("set status of code %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("redemption code %d", id))
}
