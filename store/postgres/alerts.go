package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// ClaimAlert implements store.AlertStore: the unique key (subject, period,
// threshold) makes the insert the claim, so of several instances seeing
// one crossing at once exactly one stores it.
func (s *Store) ClaimAlert(ctx context.Context, a *store.Alert) (bool, error) {
	if err := store.PrepareAlert(a, now()); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO alerts (`+store.AlertColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		ON CONFLICT (subject, period, threshold) DO NOTHING`, store.AlertArgs(a)...)
	if err != nil {
		return false, fmt.Errorf("claim alert %s %s %d%%: %w", a.Subject, a.Period, a.Threshold, sqlErr(err))
	}
	return tag.RowsAffected() == 1, nil
}

// LeaseAlerts implements store.AlertStore. The due rows are locked FOR
// UPDATE SKIP LOCKED, as LeaseTasks does: an alert another instance is
// leasing is passed over, never leased twice.
func (s *Store) LeaseAlerts(ctx context.Context, at, until time.Time, limit int) ([]*store.Alert, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT id AS due_id FROM alerts
			WHERE status = 'pending' AND next_at <= $2 AND lease_until <= $2
			ORDER BY next_at, id LIMIT $3
			FOR UPDATE SKIP LOCKED)
		UPDATE alerts SET lease_until = $1 FROM due WHERE id = due_id
		RETURNING `+store.AlertColumns, until.UnixMilli(), at.UnixMilli(), limit)
	alerts, err := collect(rows, err, store.ScanAlert, "lease alerts")
	if err != nil {
		return nil, err
	}
	// RETURNING keeps no order
	slices.SortFunc(alerts, func(a, b *store.Alert) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), strings.Compare(a.ID, b.ID))
	})
	return alerts, nil
}

// AlertAttempted implements store.AlertStore.
func (s *Store) AlertAttempted(ctx context.Context, id, status string, attempts int, nextAt time.Time, lastErr string) error {
	ts := now().UnixMilli()
	sent := int64(0)
	if status == store.AlertSent {
		sent = ts
	}
	next := store.ZeroMillis(nextAt)
	_, err := s.pool.Exec(ctx, `UPDATE alerts SET status = $1, attempts = $2, next_at = $3, lease_until = $3,
		sent_at = $4, last_error = $5 WHERE id = $6`, status, attempts, next, sent, store.TrimAlertError(lastErr), id)
	if err != nil {
		return fmt.Errorf("record alert %s attempt: %w", id, err)
	}
	return nil
}

// ListAlerts implements store.AlertStore.
func (s *Store) ListAlerts(ctx context.Context, f store.AlertFilter) ([]*store.Alert, error) {
	q, args := `SELECT `+store.AlertColumns+` FROM alerts`, []any{}
	if f.UserID != 0 {
		q += ` WHERE user_id = $1`
		args = append(args, f.UserID)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args)+1)
	rows, err := s.pool.Query(ctx, q, append(args, store.AlertListLimit(f))...)
	return collect(rows, err, store.ScanAlert, "list alerts")
}

// SetKeyAlertThresholds implements store.AlertStore.
func (s *Store) SetKeyAlertThresholds(ctx context.Context, tokenID int64, ts []int) error {
	if err := store.CheckThresholds(ts); err != nil {
		return fmt.Errorf("key %d alert thresholds: %w", tokenID, err)
	}
	var err error
	if len(ts) == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM key_alert_thresholds WHERE token_id = $1`, tokenID)
	} else {
		_, err = s.pool.Exec(ctx, `INSERT INTO key_alert_thresholds (token_id, thresholds) VALUES ($1, $2)
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
	err := s.pool.QueryRow(ctx, `SELECT thresholds FROM key_alert_thresholds WHERE token_id = $1`, tokenID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("key %d alert thresholds: %w", tokenID, err)
	}
	return store.ParseThresholds(v)
}

// DeleteAlertsBefore implements store.AlertStore.
func (s *Store) DeleteAlertsBefore(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM alerts WHERE created_at < $1 AND status != 'pending'
		AND window_name IN `+store.ExpiringAlertWindows, t.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("delete old alerts: %w", err)
	}
	return tag.RowsAffected(), nil
}
