package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreatePayment implements store.PaymentStore.
func (s *Store) CreatePayment(ctx context.Context, p *store.Payment) error {
	if err := store.PreparePayment(p, now()); err != nil {
		return err
	}
	var id int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO payments (`+strings.TrimPrefix(store.PaymentColumns, "id, ")+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.Provider, p.Reference, p.UserID, p.Item, p.Units,
			p.Amount, p.Currency, p.Status, p.Checkout, p.Charge, p.Refunded, p.Disputed,
			p.CreatedAt.UnixMilli(), p.UpdatedAt.UnixMilli())
		if err != nil {
			return sqlErr(err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		u, err := userFor(ctx, tx, p.UserID)
		if err != nil {
			return err
		}
		return addAudit(ctx, tx, store.PaymentAudit(p, store.AuditPaymentCheckout, u, p.UserID, "", 0))
	})
	if err != nil {
		return fmt.Errorf("create payment for user %d: %w", p.UserID, err)
	}
	p.ID = id
	return nil
}

// userFor is the name of a user who exists, for an audit entry.
func userFor(ctx context.Context, tx *sql.Tx, id int64) (string, error) {
	var name string
	if err := tx.QueryRowContext(ctx, `SELECT username FROM users WHERE id = ?`, id).Scan(&name); err != nil {
		return "", notFound(err, fmt.Sprintf("user %d", id))
	}
	return name, nil
}

// addAudit writes e within tx.
func addAudit(ctx context.Context, tx *sql.Tx, e *store.AuditEntry) error {
	if err := store.PrepareAudit(e, now()); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO audit_log (`+strings.TrimPrefix(store.AuditColumns, "id, ")+`)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.CreatedAt.UnixMilli(), e.ActorID, e.Actor, e.Action, e.Target,
		string(e.Before), string(e.After))
	if err != nil {
		return fmt.Errorf("add audit entry %s: %w", e.Action, err)
	}
	e.ID, err = res.LastInsertId()
	return err
}

// ApplyPaymentEvent implements store.PaymentStore. The writer's
// transactions hold the write lock from BEGIN, so the payment read here
// is the one written back.
func (s *Store) ApplyPaymentEvent(ctx context.Context, e *store.PaymentEvent) (*store.Payment, int64, error) {
	if err := store.CheckPaymentEvent(e); err != nil {
		return nil, 0, err
	}
	var (
		p     *store.Payment
		delta int64
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			one int
			err error
		)
		switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM payment_events WHERE provider = ? AND event_id = ?`,
			e.Provider, e.ID).Scan(&one); err {
		case nil:
			return fmt.Errorf("event %s applied before: %w", e.ID, store.ErrConflict)
		case sql.ErrNoRows:
		default:
			return err
		}
		if e.Kind == store.PaymentEventPaid {
			p, err = store.ScanPayment(tx.QueryRowContext(ctx, `SELECT `+store.PaymentColumns+` FROM payments
				WHERE provider = ? AND reference = ?`, e.Provider, e.Reference))
		} else {
			p, err = store.ScanPayment(tx.QueryRowContext(ctx, `SELECT `+store.PaymentColumns+` FROM payments
				WHERE provider = ? AND charge = ? ORDER BY id LIMIT 1`, e.Provider, e.Charge))
		}
		if err != nil {
			return notFound(err, "payment of event "+e.ID)
		}
		ts := now()
		if delta, err = store.MovePayment(p, e, ts); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE payments SET status = ?, checkout = ?, charge = ?, refunded = ?,
			disputed = ?, updated_at = ? WHERE id = ?`, p.Status, p.Checkout, p.Charge, p.Refunded, p.Disputed,
			p.UpdatedAt.UnixMilli(), p.ID); err != nil {
			return fmt.Errorf("update payment %d: %w", p.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO payment_events (provider, event_id, payment_id, kind, quota_delta, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, e.Provider, e.ID, p.ID, string(e.Kind), delta, ts.UnixMilli()); err != nil {
			return sqlErr(err)
		}
		if delta != 0 {
			if err := credit(ctx, tx, p.UserID, delta); err != nil {
				return err
			}
		}
		if delta > 0 {
			if err := payInvitationReward(ctx, tx, p.UserID, delta, false); err != nil {
				return err
			}
		}
		return addAudit(ctx, tx, store.PaymentAudit(p, store.PaymentAuditAction(e.Kind), e.Provider, 0, e.ID, delta))
	})
	if err != nil {
		return nil, 0, fmt.Errorf("apply %s event %s: %w", e.Provider, e.ID, err)
	}
	return p, delta, nil
}

// PaymentByReference implements store.PaymentStore.
func (s *Store) PaymentByReference(ctx context.Context, reference string) (*store.Payment, error) {
	p, err := store.ScanPayment(s.r.QueryRowContext(ctx, `SELECT `+store.PaymentColumns+` FROM payments
		WHERE reference = ?`, reference))
	if err != nil {
		return nil, notFound(err, "payment "+reference)
	}
	return p, nil
}

// ListPayments implements store.PaymentStore.
func (s *Store) ListPayments(ctx context.Context, userID int64, limit int) ([]*store.Payment, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	q, args := `SELECT `+store.PaymentColumns+` FROM payments`, []any{}
	if userID != 0 {
		q, args = q+` WHERE user_id = ?`, append(args, userID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	return collect(rows, err, store.ScanPayment, "list payments")
}
