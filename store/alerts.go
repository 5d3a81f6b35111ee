package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Budget alerts: a crossing of a threshold (a percentage of a spending
// window, of a balance or of a key's limit) is claimed once in the store,
// whatever the number of instances that see it, and its row is the outbox
// its webhook is delivered from: a crash between the claim and the send
// leaves the row pending, and whichever instance leases it next sends it.

// Alert statuses.
const (
	AlertPending = "pending" // claimed, not yet delivered
	AlertSent    = "sent"    // the receiver answered 2xx
	AlertFailed  = "failed"  // given up after the bounded attempts
)

// Alert is one claimed crossing and its delivery.
type Alert struct {
	// ID is the event id the webhook carries (unique per crossing)
	ID string `json:"id"`
	// Subject, Period and Threshold are the crossing, unique together:
	// "user:3", "daily@2026-11-26", 80
	Subject   string    `json:"subject"`
	Window    string    `json:"window"` // 5h, daily, weekly, monthly, lifetime, balance or quota (a key's limit)
	Period    string    `json:"period"`
	Threshold int       `json:"threshold"` // percent
	UserID    int64     `json:"user_id"`
	TokenID   int64     `json:"token_id,omitempty"` // the key whose request crossed it; 0 for none
	Spent     int64     `json:"spent"`              // units when the crossing was seen
	Limit     int64     `json:"limit"`
	CreatedAt time.Time `json:"created_at"`

	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	NextAt     time.Time `json:"-"`
	LeaseUntil time.Time `json:"-"`
	SentAt     time.Time `json:"sent_at,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
}

// AlertFilter selects alerts to list, newest first.
type AlertFilter struct {
	UserID int64 // 0: every user's
	Limit  int   // 100 when not positive, at most 1000
}

// AlertStore keeps claimed crossings and their delivery (the outbox), and
// the thresholds users set on their keys.
type AlertStore interface {
	// ClaimAlert stores a as a pending crossing leased to the caller until
	// a.LeaseUntil, and reports true; false (and nothing stored) when the
	// same (Subject, Period, Threshold) was claimed before, by any
	// instance.
	ClaimAlert(ctx context.Context, a *Alert) (bool, error)
	// LeaseAlerts leases up to limit pending alerts that are due (NextAt)
	// and not leased (LeaseUntil passed) at now until until; two callers
	// never lease the same alert at once.
	LeaseAlerts(ctx context.Context, now, until time.Time, limit int) ([]*Alert, error)
	// AlertAttempted records a delivery attempt: status (sent, failed or
	// pending again), the attempts made, and for pending when the next is
	// due (its lease then ends at nextAt too).
	AlertAttempted(ctx context.Context, id, status string, attempts int, nextAt time.Time, lastErr string) error
	// ListAlerts lists alerts newest first.
	ListAlerts(ctx context.Context, f AlertFilter) ([]*Alert, error)
	// SetKeyAlertThresholds sets the percentages a key's owner is alerted
	// at (none removes them).
	SetKeyAlertThresholds(ctx context.Context, tokenID int64, thresholds []int) error
	// KeyAlertThresholds returns a key's own thresholds; none when unset.
	KeyAlertThresholds(ctx context.Context, tokenID int64) ([]int, error)
	// DeleteAlertsBefore deletes delivered or given-up alerts of calendar
	// and rolling windows (whose periods cannot come again) created
	// before t, and returns how many; the claims of lifetime windows,
	// balances and key limits stay, so their crossings are never
	// announced twice.
	DeleteAlertsBefore(ctx context.Context, t time.Time) (int64, error)
}

// ExpiringAlertWindows are the windows whose alerts DeleteAlertsBefore
// may delete, as an SQL list.
const ExpiringAlertWindows = `('5h', 'daily', 'weekly', 'monthly')`

// MaxThresholds bounds the thresholds of one key (and of a configuration).
const MaxThresholds = 10

// CheckThresholds refuses a threshold outside 1..100 %, a repeated one or
// more than MaxThresholds.
func CheckThresholds(ts []int) error {
	if len(ts) > MaxThresholds {
		return fmt.Errorf("at most %d thresholds, not %d", MaxThresholds, len(ts))
	}
	seen := map[int]bool{}
	for _, t := range ts {
		if t < 1 || t > 100 {
			return fmt.Errorf("threshold %d%% is not between 1%% and 100%%", t)
		}
		if seen[t] {
			return fmt.Errorf("threshold %d%% is given twice", t)
		}
		seen[t] = true
	}
	return nil
}

// FormatThresholds is the thresholds column: "50,80,100".
func FormatThresholds(ts []int) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = strconv.Itoa(t)
	}
	return strings.Join(s, ",")
}

// ParseThresholds reads the thresholds column.
func ParseThresholds(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ts []int
	for f := range strings.SplitSeq(s, ",") {
		t, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("thresholds %q: %w", s, err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// PrepareAlert checks a crossing before it is claimed.
func PrepareAlert(a *Alert, now time.Time) error {
	switch {
	case a.ID == "":
		return errors.New("claim alert: empty id")
	case a.Subject == "" || a.Period == "":
		return errors.New("claim alert: no subject or period")
	case a.Threshold < 1:
		return errors.New("claim alert: no threshold")
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now
	}
	if a.NextAt.IsZero() {
		a.NextAt = a.CreatedAt
	}
	a.Status = AlertPending
	return nil
}

// AlertColumns are the alerts columns ScanAlert reads, in its order.
const AlertColumns = `id, subject, window_name, period, threshold, user_id, token_id, spent, limit_units,
	created_at, status, attempts, next_at, lease_until, sent_at, last_error`

// ScanAlert reads a row of AlertColumns.
func ScanAlert(sc RowScanner) (*Alert, error) {
	var a Alert
	var created, next, lease, sent int64
	if err := sc.Scan(&a.ID, &a.Subject, &a.Window, &a.Period, &a.Threshold, &a.UserID, &a.TokenID,
		&a.Spent, &a.Limit, &created, &a.Status, &a.Attempts, &next, &lease, &sent, &a.LastError); err != nil {
		return nil, err
	}
	a.CreatedAt = FromMillisOrZero(created)
	a.NextAt = FromMillisOrZero(next)
	a.LeaseUntil = FromMillisOrZero(lease)
	a.SentAt = FromMillisOrZero(sent)
	return &a, nil
}

// AlertArgs are a's values in AlertColumns' order, for an insert.
func AlertArgs(a *Alert) []any {
	return []any{a.ID, a.Subject, a.Window, a.Period, a.Threshold, a.UserID, a.TokenID, a.Spent, a.Limit,
		ZeroMillis(a.CreatedAt), a.Status, a.Attempts, ZeroMillis(a.NextAt), ZeroMillis(a.LeaseUntil),
		ZeroMillis(a.SentAt), a.LastError}
}

// AlertListLimit is f's page size.
func AlertListLimit(f AlertFilter) int {
	switch {
	case f.Limit <= 0:
		return 100
	case f.Limit > 1000:
		return 1000
	}
	return f.Limit
}

// MaxAlertError bounds a delivery error kept on an alert.
const MaxAlertError = 300

// TrimAlertError cuts a delivery error to MaxAlertError bytes.
func TrimAlertError(s string) string {
	if len(s) > MaxAlertError {
		return s[:MaxAlertError]
	}
	return s
}
