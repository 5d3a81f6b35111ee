package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// ClaimAlert implements store.AlertStore: the unique key (subject, period,
// threshold) makes the insert the claim.
func (s *Store) ClaimAlert(ctx context.Context, a *store.Alert) (bool, error) {
	if err := store.PrepareAlert(a, now()); err != nil {
		return false, err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO alerts (`+store.AlertColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (subject, period, threshold) DO NOTHING`, store.AlertArgs(a)...)
	if err != nil {
		return false, fmt.Errorf("claim alert %s %s %d%%: %w", a.Subject, a.Period, a.Threshold, sqlErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim alert: %w", err)
	}
	return n == 1, nil
}

// LeaseAlerts implements store.AlertStore. The one writer connection
// serializes the update, so two callers cannot lease one row.
func (s *Store) LeaseAlerts(ctx context.Context, at, until time.Time, limit int) ([]*store.Alert, error) {
	if limit <= 0 {
		limit = 100
	}
	ts := at.UnixMilli()
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM alerts WHERE status = 'pending'
		AND next_at <= ?1 AND lease_until <= ?1 LIMIT 1`, ts).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease alerts: %w", err)
	}
	rows, err := s.w.QueryContext(ctx, `UPDATE alerts SET lease_until = ?1
		WHERE id IN (SELECT id FROM alerts WHERE status = 'pending' AND next_at <= ?2
			AND lease_until <= ?2 ORDER BY next_at, id LIMIT ?3)
		RETURNING `+store.AlertColumns, until.UnixMilli(), ts, limit)
	return collect(rows, err, store.ScanAlert, "lease alerts")
}

// AlertAttempted implements store.AlertStore.
func (s *Store) AlertAttempted(ctx context.Context, id, status string, attempts int, nextAt time.Time, lastErr string) error {
	ts := now().UnixMilli()
	sent := int64(0)
	if status == store.AlertSent {
		sent = ts
	}
	next := store.ZeroMillis(nextAt)
	_, err := s.w.ExecContext(ctx, `UPDATE alerts SET status = ?, attempts = ?, next_at = ?, lease_until = ?,
		sent_at = ?, last_error = ? WHERE id = ?`, status, attempts, next, next, sent, store.TrimAlertError(lastErr), id)
	if err != nil {
		return fmt.Errorf("record alert %s attempt: %w", id, err)
	}
	return nil
}

// ListAlerts implements store.AlertStore.
func (s *Store) ListAlerts(ctx context.Context, f store.AlertFilter) ([]*store.Alert, error) {
	q, args := `SELECT `+store.AlertColumns+` FROM alerts`, []any{}
	if f.UserID != 0 {
		q += ` WHERE user_id = ?`
		args = append(args, f.UserID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	rows, err := s.r.QueryContext(ctx, q, append(args, store.AlertListLimit(f))...)
	return collect(rows, err, store.ScanAlert, "list alerts")
}

// SetKeyAlertThresholds implements store.AlertStore.
func (s *Store) SetKeyAlertThresholds(ctx context.Context, tokenID int64, ts []int) error {
	if err := store.CheckThresholds(ts); err != nil {
		return fmt.Errorf("key %d alert thresholds: %w", tokenID, err)
	}
	var err error
	if len(ts) == 0 {
		_, err = s.w.ExecContext(ctx, `DELETE FROM key_alert_thresholds WHERE token_id = ?`, tokenID)
	} else {
		_, err = s.w.ExecContext(ctx, `INSERT INTO key_alert_thresholds (token_id, thresholds) VALUES (?, ?)
			ON CONFLICT (token_id) DO UPDATE SET thresholds = excluded.thresholds`, tokenID, store.FormatThresholds(ts))
	}
	if err != nil {
		return fmt.Errorf("set key %d alert thresholds: %w", tokenID, err)
	}
	return nil
}

// KeyAlertThresholds implements store.AlertStore.
func (s *Store) KeyAlertThresholds(ctx context.Context, tokenID int64) ([]int, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT thresholds FROM key_alert_thresholds WHERE token_id = ?`, tokenID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("key %d alert thresholds: %w", tokenID, err)
	}
	return store.ParseThresholds(v)
}

// DeleteAlertsBefore implements store.AlertStore.
func (s *Store) DeleteAlertsBefore(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM alerts WHERE created_at < ? AND status != 'pending'
		AND window_name IN `+store.ExpiringAlertWindows, t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("delete old alerts: %w", err)
	}
	return res.RowsAffected()
}
