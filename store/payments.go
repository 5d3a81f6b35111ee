package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// A payment is a user's self-serve top-up through a payment provider (a
// hosted checkout): stored pending when the checkout starts, then moved by
// the provider's signed events, each applied once and in the transaction
// that changes the balance, so a payment is never credited twice nor half
// recorded.

// Payment statuses.
const (
	PaymentPending           = "pending"
	PaymentPaid              = "paid"
	PaymentPartiallyRefunded = "partially_refunded"
	PaymentRefunded          = "refunded"
	PaymentDisputed          = "disputed"
)

// PaymentEventKind is what a provider's event did to a payment.
type PaymentEventKind string

// The events a payment moves by.
const (
	// PaymentEventPaid: the customer paid; the payment's units are credited.
	PaymentEventPaid PaymentEventKind = "paid"
	// PaymentEventRefunded: money went back to the customer; Amount is the
	// total refunded so far, and the units it is worth are debited (what
	// earlier refunds took is not taken again).
	PaymentEventRefunded PaymentEventKind = "refunded"
	// PaymentEventDisputed: the customer's bank opened a dispute (a
	// chargeback) for Amount; the units it is worth are debited at once.
	PaymentEventDisputed PaymentEventKind = "disputed"
)

// Payment is one top-up.
type Payment struct {
	ID int64 `json:"id"`
	// Provider is the payment provider's module name ("stripe").
	Provider string `json:"provider"`
	// Reference is the gateway's own id of the payment, which the
	// checkout carries to the provider and its events carry back; unique.
	Reference string `json:"reference"`
	UserID    int64  `json:"user_id"`
	// Item is the price-list item bought.
	Item string `json:"item"`
	// Units is what the payment credits (1,000,000 = 1 USD).
	Units int64 `json:"units"`
	// Amount is what the customer is charged, in the currency's smallest
	// unit (cents for USD); Currency is lower-case ISO 4217.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
	// Checkout and Charge are the provider's ids of the checkout and of
	// the payment it made (which refunds and disputes name), known once
	// paid.
	Checkout string `json:"checkout,omitempty"`
	Charge   string `json:"charge,omitempty"`
	// Refunded and Disputed are the units refunds and disputes took back;
	// together never more than Units.
	Refunded  int64     `json:"refunded"`
	Disputed  int64     `json:"disputed"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PaymentEvent is one verified event of a provider.
type PaymentEvent struct {
	Provider string
	// ID is the provider's id of the event: an event is applied once.
	ID   string
	Kind PaymentEventKind
	// Reference finds the payment of a paid event (the gateway's own id);
	// Charge the payment of a refund or dispute (the provider's id of
	// what was paid), and is kept by a paid event.
	Reference string
	Checkout  string
	Charge    string
	// Amount is in the currency's smallest unit: paid, what was paid;
	// refunded, what was refunded in all so far; disputed, what the
	// dispute is for.
	Amount   int64
	Currency string
}

// PaymentStore keeps top-ups.
type PaymentStore interface {
	// CreatePayment stores a pending payment (setting ID, Status and the
	// times) and its audit entry (the user started a checkout), in one
	// transaction; a Reference already stored is ErrConflict.
	CreatePayment(ctx context.Context, p *Payment) error
	// ApplyPaymentEvent applies e to the payment it names, in one
	// transaction: it records e's id, moves the payment, changes the
	// user's balance (a credit pays any invitation reward the user's
	// signup owes, as CreditQuota does; a debit may take the balance below
	// zero: the units were spendable and may be spent) and writes the
	// audit entry. It returns the payment as it then is and the change to
	// the balance (negative for a debit; 0 when the event changed
	// nothing, such as a second paid event of a paid payment).
	// ErrConflict: e was applied before, and nothing changes.
	// ErrNotFound: no payment of e.Provider is named, and nothing is
	// recorded. ErrPaymentMismatch: a paid event whose amount or currency
	// is not the payment's, and nothing is recorded.
	ApplyPaymentEvent(ctx context.Context, e *PaymentEvent) (*Payment, int64, error)
	// PaymentByReference returns a payment by its Reference.
	PaymentByReference(ctx context.Context, reference string) (*Payment, error)
	// ListPayments returns a user's payments (every user's when userID is
	// 0), newest first, at most limit (100 when not positive).
	ListPayments(ctx context.Context, userID int64, limit int) ([]*Payment, error)
}

// ErrPaymentMismatch is a paid event that does not match its payment.
var ErrPaymentMismatch = errors.New("payment does not match its checkout")

// Audit actions of payments.
const (
	AuditPaymentCheckout = "payment.checkout"
	AuditPaymentPaid     = "payment.paid"
	AuditPaymentRefunded = "payment.refunded"
	AuditPaymentDisputed = "payment.disputed"
)

// PreparePayment checks a payment before it is stored and sets its status
// and times.
func PreparePayment(p *Payment, now time.Time) error {
	switch {
	case p.Provider == "" || p.Reference == "":
		return errors.New("create payment: no provider or reference")
	case p.UserID == 0:
		return errors.New("create payment: no user")
	case p.Units <= 0 || p.Amount <= 0:
		return fmt.Errorf("create payment: units (%d) and amount (%d) must be positive", p.Units, p.Amount)
	case p.Currency == "":
		return errors.New("create payment: no currency")
	}
	p.Status = PaymentPending
	p.CreatedAt, p.UpdatedAt = now, now
	return nil
}

// CheckPaymentEvent checks an event before it is applied.
func CheckPaymentEvent(e *PaymentEvent) error {
	if e.Provider == "" || e.ID == "" {
		return errors.New("apply payment event: no provider or event id")
	}
	switch e.Kind {
	case PaymentEventPaid:
		if e.Reference == "" {
			return errors.New("apply payment event: a paid event names no payment")
		}
	case PaymentEventRefunded, PaymentEventDisputed:
		if e.Charge == "" {
			return fmt.Errorf("apply payment event: a %s event names no charge", e.Kind)
		}
	default:
		return fmt.Errorf("apply payment event: unknown kind %q", e.Kind)
	}
	if e.Amount < 0 {
		return fmt.Errorf("apply payment event: negative amount %d", e.Amount)
	}
	return nil
}

// MovePayment applies e to p (as read in the event's transaction) and
// returns the change to the balance: what both drivers do between reading
// the payment and writing it back.
func MovePayment(p *Payment, e *PaymentEvent, now time.Time) (int64, error) {
	var delta int64
	switch e.Kind {
	case PaymentEventPaid:
		if e.Amount != p.Amount || e.Currency != p.Currency {
			return 0, fmt.Errorf("payment %s: paid %d %s, the checkout was for %d %s: %w",
				p.Reference, e.Amount, e.Currency, p.Amount, p.Currency, ErrPaymentMismatch)
		}
		if p.Status != PaymentPending {
			return 0, nil // paid before (a second event for one payment)
		}
		p.Status, p.Checkout, p.Charge = PaymentPaid, e.Checkout, e.Charge
		delta = p.Units
	case PaymentEventRefunded:
		// Amount is the running total: the units it is worth, less what
		// refunds took before, and never past what is left
		want := unitsOf(p, e.Amount) - p.Refunded
		take := min(max(want, 0), p.Units-p.Refunded-p.Disputed)
		p.Refunded += take
		delta = -take
		if p.Status != PaymentDisputed {
			p.Status = PaymentPartiallyRefunded
			if p.Refunded+p.Disputed == p.Units {
				p.Status = PaymentRefunded
			}
		}
	case PaymentEventDisputed:
		take := min(unitsOf(p, e.Amount), p.Units-p.Refunded-p.Disputed)
		p.Disputed += take
		p.Status = PaymentDisputed
		delta = -take
	}
	p.UpdatedAt = now
	return delta, nil
}

// unitsOf is what amount (of the currency's smallest unit) is worth of the
// payment's units, rounded up, exactly: Units × amount can pass 64 bits.
func unitsOf(p *Payment, amount int64) int64 {
	if amount >= p.Amount {
		return p.Units
	}
	if amount <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(p.Units), uint64(amount))
	// hi < Amount: Units < 2^63 and amount < Amount
	q, r := bits.Div64(hi, lo, uint64(p.Amount))
	if r != 0 {
		q++
	}
	return int64(q)
}

// PaymentAudit is the audit entry of a payment's step: the provider (or
// the user, for a checkout) acted on the user's balance. No secret is in
// a payment.
func PaymentAudit(p *Payment, action, actor string, actorID int64, event string, delta int64) *AuditEntry {
	after := map[string]any{"payment": p.Reference, "provider": p.Provider, "item": p.Item, "status": p.Status,
		"amount": p.Amount, "currency": p.Currency, "units": p.Units}
	if event != "" {
		after["event"] = event
	}
	if delta != 0 {
		after["quota_delta"] = delta
	}
	if p.Charge != "" {
		after["charge"] = p.Charge
	}
	b, _ := json.Marshal(after) // strings and integers only
	return &AuditEntry{ActorID: actorID, Actor: actor, Action: action,
		Target: "user:" + strconv.FormatInt(p.UserID, 10), After: b}
}

// PaymentAuditAction is the audit action of an event's kind.
func PaymentAuditAction(k PaymentEventKind) string {
	switch k {
	case PaymentEventPaid:
		return AuditPaymentPaid
	case PaymentEventRefunded:
		return AuditPaymentRefunded
	}
	return AuditPaymentDisputed
}

// PaymentColumns are the payments columns ScanPayment reads, in its order.
const PaymentColumns = `id, provider, reference, user_id, item, units, amount, currency, status,
	checkout, charge, refunded, disputed, created_at, updated_at`

// ScanPayment reads a row of PaymentColumns.
func ScanPayment(sc RowScanner) (*Payment, error) {
	var (
		p                    Payment
		createdAt, updatedAt *int64
	)
	if err := sc.Scan(&p.ID, &p.Provider, &p.Reference, &p.UserID, &p.Item, &p.Units, &p.Amount, &p.Currency,
		&p.Status, &p.Checkout, &p.Charge, &p.Refunded, &p.Disputed, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt = FromMillis(createdAt), FromMillis(updatedAt)
	return &p, nil
}
