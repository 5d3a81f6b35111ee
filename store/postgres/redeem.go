package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateRedemptionCodes inserts every code in one transaction, setting each
// one's ID and, if zero, CreatedAt. A code already stored is
// store.ErrConflict and none of the batch is kept. The inserts travel in
// one round trip.
func (s *Store) CreateRedemptionCodes(ctx context.Context, codes []*store.RedemptionCode) error {
	if err := store.CheckCodes(codes); err != nil {
		return err
	}
	ts := now()
	ids := make([]int64, len(codes))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, c := range codes {
			createdAt := c.CreatedAt
			if createdAt.IsZero() {
				createdAt = ts
			}
			if c.Status == "" {
				c.Status = store.CodeEnabled
			}
			b.Queue(`INSERT INTO redemption_codes
				(code, quota, status, used_by, created_at, redeemed_at, expires_at, name, plan, plan_days)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
				c.Code, c.Quota, c.Status, c.UsedBy, createdAt.UnixMilli(), store.Millis(c.RedeemedAt), store.Millis(c.ExpiresAt), c.Name, c.Plan, c.PlanDays)
		}
		br := tx.SendBatch(ctx, b)
		for i := range codes {
			if err := br.QueryRow().Scan(&ids[i]); err != nil {
				br.Close()
				return fmt.Errorf("code %d: %w", i, sqlErr(err))
			}
		}
		return br.Close()
	})
	if err != nil {
		return fmt.Errorf("create redemption codes: %w", err)
	}
	store.CreatedCodes(codes, ids, ts)
	return nil
}

// Redeem marks code used by userID and credits its quota to that user, and
// on the user's first payment their inviter's reward, in one transaction,
// and returns the amount credited. store.ErrNotFound when the code does
// not exist, was used already, is disabled or expired, or the user does
// not exist: the caller cannot tell which, and need not.
func (s *Store) Redeem(ctx context.Context, code string, userID int64) (int64, error) {
	if err := store.CheckRedeem(code, userID); err != nil {
		return 0, err
	}
	var (
		quota int64
		plan  string
		days  int64
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Claiming the code is conditional on it being unused. A second
		// claim, from any instance, waits on the first one's row lock and
		// then checks the condition again on the committed row: of any
		// number of concurrent redemptions exactly one gets a row back.
		ts := now().UnixMilli()
		err := tx.QueryRow(ctx, `UPDATE redemption_codes SET used_by = $1, redeemed_at = $2
			WHERE code = $3 AND used_by = 0 AND status = $4 AND (expires_at IS NULL OR expires_at > $2)
			RETURNING quota, plan, plan_days`,
			userID, ts, code, store.CodeEnabled).Scan(&quota, &plan, &days)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("code missing, used, disabled or expired: %w", store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		balance, err := lockPayer(ctx, tx, userID)
		if err != nil {
			return err
		}
		if err := credit(ctx, tx, userID, balance, quota); err != nil {
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
	q, args := `SELECT `+store.CodeColumns+` FROM redemption_codes WHERE id < $1`, []any{before}
	if f.Name != "" {
		args = append(args, f.Name)
		q += ` AND name = $` + strconv.Itoa(len(args))
	}
	if f.Search != "" {
		args = append(args, store.LikePart(f.Search))
		n := strconv.Itoa(len(args))
		q += ` AND (name ILIKE $` + n + ` OR code ILIKE $` + n + `)`
	}
	if f.UsedBy != 0 {
		args = append(args, f.UsedBy)
		q += ` AND used_by = $` + strconv.Itoa(len(args))
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, q+` ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	return collect(rows, err, store.ScanCode, "list redemption codes")
}

// SetRedemptionCodeStatus enables or disables a code.
func (s *Store) SetRedemptionCodeStatus(ctx context.Context, id int64, status string) error {
	if status != store.CodeEnabled && status != store.CodeDisabled {
		return fmt.Errorf("set status of code %d: unknown status %q", id, status)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE redemption_codes SET status = $1 WHERE id = $2`, status, id)
	if err != nil {
		return fmt.Errorf("set status of code %d: %w", id, err)
	}
	return mustAffect(tag, fmt.Sprintf("redemption code %d", id))
}
