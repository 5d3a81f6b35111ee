package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// SetBudget upserts, or with limit 0 deletes, one window's limit.
func (s *Store) SetBudget(ctx context.Context, subject, window string, limit int64) error {
	var err error
	if limit == 0 {
		_, err = s.w.ExecContext(ctx, `DELETE FROM budgets WHERE subject = ? AND window_kind = ?`, subject, window)
	} else {
		_, err = s.w.ExecContext(ctx, `INSERT INTO budgets (subject, window_kind, limit_units) VALUES (?, ?, ?)
			ON CONFLICT (subject, window_kind) DO UPDATE SET limit_units = excluded.limit_units`, subject, window, limit)
	}
	if err != nil {
		return fmt.Errorf("set budget %s %s: %w", subject, window, err)
	}
	return nil
}

// Budgets reads the limits of subjects.
func (s *Store) Budgets(ctx context.Context, subjects []string) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	if len(subjects) == 0 {
		return out, nil
	}
	args := make([]any, len(subjects))
	for i, v := range subjects {
		args[i] = v
	}
	rows, err := s.r.QueryContext(ctx, `SELECT subject, window_kind, limit_units FROM budgets WHERE subject IN (`+
		strings.TrimSuffix(strings.Repeat("?,", len(subjects)), ",")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("budgets: %w", err)
	}
	defer rows.Close()
	if err := store.ReadBudgets(rows, out); err != nil {
		return nil, fmt.Errorf("budgets: %w", err)
	}
	return out, nil
}

// SetUserGroup sets a user's budget group.
func (s *Store) SetUserGroup(ctx context.Context, userID int64, group string) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO user_budgets (user_id, budget_group) VALUES (?, ?)
		ON CONFLICT (user_id) DO UPDATE SET budget_group = excluded.budget_group`, userID, group)
	if err != nil {
		return fmt.Errorf("set user group: %w", err)
	}
	return nil
}

// SetUserPlan sets a user's plan and its end.
func (s *Store) SetUserPlan(ctx context.Context, userID int64, plan string, until time.Time) error {
	ms := store.PlanUntilMillis(plan, until)
	_, err := s.w.ExecContext(ctx, `INSERT INTO user_budgets (user_id, plan, plan_until) VALUES (?, ?, ?)
		ON CONFLICT (user_id) DO UPDATE SET plan = excluded.plan, plan_until = excluded.plan_until`, userID, plan, ms)
	if err != nil {
		return fmt.Errorf("set user plan: %w", err)
	}
	return nil
}

// UserBudget reads a user's group and plan.
func (s *Store) UserBudget(ctx context.Context, userID int64) (store.UserBudget, error) {
	b, err := store.ScanUserBudget(s.r.QueryRowContext(ctx,
		`SELECT `+store.UserBudgetColumns+` FROM user_budgets WHERE user_id = ?`, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("user budget: %w", err)
	}
	return b, nil
}

// WindowSpend reads committed spend by window id.
func (s *Store) WindowSpend(ctx context.Context, ids []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, v := range ids {
		args[i] = v
	}
	rows, err := s.r.QueryContext(ctx, `SELECT window_id, spent FROM window_spend WHERE window_id IN (`+
		strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("window spend: %w", err)
	}
	defer rows.Close()
	if err := store.ReadWindowSpend(rows, out); err != nil {
		return nil, fmt.Errorf("window spend: %w", err)
	}
	return out, nil
}

// addWindowSpend adds each written row's cost to its windows, summed per
// window first, within the settling transaction.
func addWindowSpend(ctx context.Context, tx execer, spend map[string]int64) error {
	for _, id := range slices.Sorted(maps.Keys(spend)) { // in order: no deadlock between batches
		cost := spend[id]
		if _, err := tx.ExecContext(ctx, `INSERT INTO window_spend (window_id, spent) VALUES (?, ?)
			ON CONFLICT (window_id) DO UPDATE SET spent = window_spend.spent + excluded.spent`, id, cost); err != nil {
			return fmt.Errorf("window spend %s: %w", id, err)
		}
	}
	return nil
}

// grantPlan gives a redeemed plan code's plan to userID for days from
// nowMS, or from the end of the same plan still running (a renewal adds
// on); a plan without end stays so. Within the redemption's transaction.
func grantPlan(ctx context.Context, tx *sql.Tx, userID int64, plan string, days, nowMS int64) error {
	if plan == "" {
		return nil
	}
	span := days * 24 * int64(time.Hour/time.Millisecond)
	_, err := tx.ExecContext(ctx, `INSERT INTO user_budgets (user_id, plan, plan_until) VALUES (?1, ?2, ?3 + ?4)
		ON CONFLICT (user_id) DO UPDATE SET plan = excluded.plan, plan_until = CASE
			WHEN user_budgets.plan = excluded.plan AND user_budgets.plan_until = 0 THEN 0
			WHEN user_budgets.plan = excluded.plan AND user_budgets.plan_until > ?3 THEN user_budgets.plan_until + ?4
			ELSE excluded.plan_until END`, userID, plan, nowMS, span)
	if err != nil {
		return fmt.Errorf("grant plan %s: %w", plan, err)
	}
	return nil
}

// ClaimWindow claims window room; the single writer connection serializes
// claims, so the lock row is only named.
func (s *Store) ClaimWindow(ctx context.Context, lock string, ids []string, limit, want, least int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var granted int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, len(ids))
		for i, v := range ids {
			args[i] = v
		}
		var claimed int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(claimed), 0) FROM window_claims WHERE window_id IN (`+
			strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`)`, args...).Scan(&claimed); err != nil {
			return err
		}
		if granted = store.WindowGrant(limit, claimed, want, least); granted == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO window_claims (window_id, claimed) VALUES (?, ?)
			ON CONFLICT (window_id) DO UPDATE SET claimed = window_claims.claimed + excluded.claimed`, ids[len(ids)-1], granted)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("claim window %s: %w", lock, err)
	}
	return granted, nil
}

// ReturnWindow adds delta to a period's claim.
func (s *Store) ReturnWindow(ctx context.Context, id string, delta int64) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO window_claims (window_id, claimed) VALUES (?, ?)
		ON CONFLICT (window_id) DO UPDATE SET claimed = window_claims.claimed + excluded.claimed`, id, delta)
	if err != nil {
		return fmt.Errorf("return window %s: %w", id, err)
	}
	return nil
}
