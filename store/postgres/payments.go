package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreatePayment implements store.PaymentStore.
func (s *Store) CreatePayment(ctx context.Context, p *store.Payment) error {
	if err := store.PreparePayment(p, now()); err != nil {
		return err
	}
	var id int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO payments (`+strings.TrimPrefix(store.PaymentColumns, "id, ")+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`, p.Provider, p.Reference,
			p.UserID, p.Item, p.Units, p.Amount, p.Currency, p.Status, p.Checkout, p.Charge, p.Refunded, p.Disputed,
			p.CreatedAt.UnixMilli(), p.UpdatedAt.UnixMilli()).Scan(&id)
		if err != nil {
			return sqlErr(err)
		}
		var name string
		if err := tx.QueryRow(ctx, `SELECT username FROM users WHERE id = $1`, p.UserID).Scan(&name); err != nil {
			return notFound(err, fmt.Sprintf("user %d", p.UserID))
		}
		return addAudit(ctx, tx, store.PaymentAudit(p, store.AuditPaymentCheckout, name, p.UserID, "", 0))
	})
	if err != nil {
		return fmt.Errorf("create payment for user %d: %w", p.UserID, err)
	}
	p.ID = id
	return nil
}

// addAudit writes e within tx.
func addAudit(ctx context.Context, tx pgx.Tx, e *store.AuditEntry) error {
	if err := store.PrepareAudit(e, now()); err != nil {
		return err
	}
	err := tx.QueryRow(ctx, `INSERT INTO audit_log (`+strings.TrimPrefix(store.AuditColumns, "id, ")+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, e.CreatedAt.UnixMilli(), e.ActorID, e.Actor, e.Action,
		e.Target, string(e.Before), string(e.After)).Scan(&e.ID)
	if err != nil {
		return fmt.Errorf("add audit entry %s: %w", e.Action, err)
	}
	return nil
}

// ApplyPaymentEvent implements store.PaymentStore. The payment's row is
// locked first, then its user's (lockPayer), the order every payment
// event takes; two deliveries of one event wait on the payment, and the
// second finds the first's event id when it gets it.
func (s *Store) ApplyPaymentEvent(ctx context.Context, e *store.PaymentEvent) (*store.Payment, int64, error) {
	if err := store.CheckPaymentEvent(e); err != nil {
		return nil, 0, err
	}
	var (
		p     *store.Payment
		delta int64
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if e.Kind == store.PaymentEventPaid {
			p, err = store.ScanPayment(tx.QueryRow(ctx, `SELECT `+store.PaymentColumns+` FROM payments
				WHERE provider = $1 AND reference = $2 FOR UPDATE`, e.Provider, e.Reference))
		} else {
			p, err = store.ScanPayment(tx.QueryRow(ctx, `SELECT `+store.PaymentColumns+` FROM payments
				WHERE provider = $1 AND charge = $2 ORDER BY id LIMIT 1 FOR UPDATE`, e.Provider, e.Charge))
		}
		if err != nil {
			return notFound(err, "payment of event "+e.ID)
		}
		var one int
		switch err := tx.QueryRow(ctx, `SELECT 1 FROM payment_events WHERE provider = $1 AND event_id = $2`,
			e.Provider, e.ID).Scan(&one); {
		case err == nil:
			return fmt.Errorf("event %s applied before: %w", e.ID, store.ErrConflict)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		ts := now()
		if delta, err = store.MovePayment(p, e, ts); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE payments SET status = $1, checkout = $2, charge = $3, refunded = $4,
			disputed = $5, updated_at = $6 WHERE id = $7`, p.Status, p.Checkout, p.Charge, p.Refunded, p.Disputed,
			p.UpdatedAt.UnixMilli(), p.ID); err != nil {
			return fmt.Errorf("update payment %d: %w", p.ID, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO payment_events (provider, event_id, payment_id, kind, quota_delta, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, e.Provider, e.ID, p.ID, string(e.Kind), delta, ts.UnixMilli()); err != nil {
			return sqlErr(err)
		}
		if delta != 0 {
			quota, err := lockPayer(ctx, tx, p.UserID)
			if err != nil {
				return err
			}
			if err := credit(ctx, tx, p.UserID, quota, delta); err != nil {
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
	p, err := store.ScanPayment(s.pool.QueryRow(ctx, `SELECT `+store.PaymentColumns+` FROM payments
		WHERE reference = $1`, reference))
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
	var (
		rows pgx.Rows
		err  error
	)
	if userID != 0 {
		rows, err = s.pool.Query(ctx, `SELECT `+store.PaymentColumns+` FROM payments WHERE user_id = $1
			ORDER BY id DESC LIMIT $2`, userID, limit)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+store.PaymentColumns+` FROM payments ORDER BY id DESC LIMIT $1`, limit)
	}
	return collect(rows, err, store.ScanPayment, "list payments")
}
