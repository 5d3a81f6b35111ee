// Package payments is self-serve top-up: a price list the operator sets, a
// checkout at a payment provider for one of its items, and the provider's
// signed webhook, whose events credit (paid) or debit (refunded, disputed)
// the user's balance through the store, each event once, in the
// transaction that records it.
//
// A provider (Stripe, or an Epay-style gateway) is a small interface: start
// a hosted checkout, verify and parse a webhook. Providers live in
// subpackages that register themselves as Caddy guest modules
// (gateway.payments.<name>); this package imports no Caddy.
package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Provider is a payment provider.
type Provider interface {
	// CreateCheckout starts a hosted checkout for c.Item; the customer
	// pays at the answer's URL. c.Reference must come back on the
	// provider's events for this payment (PaymentEvent.Reference).
	CreateCheckout(ctx context.Context, c CheckoutRequest) (*Checkout, error)
	// ParseWebhook verifies a webhook delivery's signature against the
	// body as received and returns its event (Provider left for the
	// caller to set): ErrSignature when the signature is missing, wrong
	// or too old; a nil event and no error for an event that moves no
	// payment (another type, a checkout not yet paid).
	ParseWebhook(header http.Header, body []byte) (*store.PaymentEvent, error)
}

// ErrSignature is a webhook whose signature does not verify.
var ErrSignature = errors.New("webhook signature does not verify")

// Item is one entry of the operator's price list.
type Item struct {
	ID string `json:"id"`
	// Amount is what the customer pays, in the currency's smallest unit
	// (cents for USD); Currency is lower-case ISO 4217.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Units is what the payment credits (1,000,000 = 1 USD).
	Units int64 `json:"units"`
}

// Price is Amount in the currency's major unit, as a decimal ("10.00").
func (it Item) Price() string { return FormatAmount(it.Amount, it.Currency) }

// CheckoutRequest is what a provider's checkout is made of.
type CheckoutRequest struct {
	// Reference is the gateway's id of the payment.
	Reference string
	UserID    int64
	Item      Item
	// SuccessURL and CancelURL are where the provider sends the customer
	// back after paying, or after giving up.
	SuccessURL, CancelURL string
}

// Checkout is a started checkout: the provider's id of it, and the page
// where the customer pays.
type Checkout struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// Config is what a Service works with.
type Config struct {
	// Name is the provider's module name, which its payments and events
	// are stored under ("stripe").
	Name     string
	Provider Provider
	Items    []Item
	// SuccessURL and CancelURL are where the customer comes back to.
	SuccessURL, CancelURL string
	Store                 store.Store
	// Credit tells the quota ledger that a user's balance changed by delta
	// (negative for a debit), once the store committed it.
	Credit func(userID, delta int64)
	Log    *zap.Logger
}

// Service runs top-ups through one provider.
type Service struct {
	cfg   Config
	items map[string]Item
}

// New checks the price list and returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Name == "" || cfg.Provider == nil || cfg.Store == nil {
		return nil, errors.New("payments: a provider, its name and a store are required")
	}
	if len(cfg.Items) == 0 {
		return nil, fmt.Errorf("payments %s: the price list is empty: add at least one item", cfg.Name)
	}
	if cfg.SuccessURL == "" || cfg.CancelURL == "" {
		return nil, fmt.Errorf("payments %s: success_url and cancel_url are required: where the customer comes back to", cfg.Name)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Credit == nil {
		cfg.Credit = func(int64, int64) {}
	}
	s := &Service{cfg: cfg, items: map[string]Item{}}
	for _, it := range cfg.Items {
		if err := checkItem(it); err != nil {
			return nil, fmt.Errorf("payments %s: %w", cfg.Name, err)
		}
		if _, dup := s.items[it.ID]; dup {
			return nil, fmt.Errorf("payments %s: price %q is listed twice", cfg.Name, it.ID)
		}
		s.items[it.ID] = it
	}
	return s, nil
}

func checkItem(it Item) error {
	switch {
	case it.ID == "":
		return errors.New("a price has no id")
	case it.Amount <= 0:
		return fmt.Errorf("price %q: the amount must be positive", it.ID)
	case len(it.Currency) != 3 || strings.ToLower(it.Currency) != it.Currency:
		return fmt.Errorf("price %q: currency %q is not a lower-case ISO 4217 code such as usd", it.ID, it.Currency)
	case it.Units <= 0:
		return fmt.Errorf("price %q: the credit must be a positive number of units (1000000 = 1 USD)", it.ID)
	}
	return nil
}

// Name is the provider's name.
func (s *Service) Name() string { return s.cfg.Name }

// Items is the price list, in the operator's order.
func (s *Service) Items() []Item { return s.cfg.Items }

// ErrProvider is a provider's failure to start a checkout.
var ErrProvider = errors.New("the payment provider failed")

// ErrUnknownItem is a checkout for an item the price list does not have.
var ErrUnknownItem = errors.New("no such price")

// referenceLen is the random part of a payment's reference.
const referenceLen = 24

// Checkout stores a pending payment of item for u and starts its checkout
// at the provider. The payment is stored first, so that a webhook for it
// always finds it; a checkout that fails to start leaves it pending, which
// credits nothing.
func (s *Service) Checkout(ctx context.Context, u *store.User, itemID string) (*Checkout, error) {
	it, ok := s.items[itemID]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownItem, itemID)
	}
	ref, err := keys.Random("pay_", referenceLen)
	if err != nil {
		return nil, err
	}
	p := &store.Payment{Provider: s.cfg.Name, Reference: ref, UserID: u.ID, Item: it.ID, Units: it.Units,
		Amount: it.Amount, Currency: it.Currency}
	if err := s.cfg.Store.CreatePayment(ctx, p); err != nil {
		return nil, err
	}
	c, err := s.cfg.Provider.CreateCheckout(ctx, CheckoutRequest{Reference: ref, UserID: u.ID, Item: it,
		SuccessURL: s.cfg.SuccessURL, CancelURL: s.cfg.CancelURL})
	if err != nil {
		return nil, fmt.Errorf("start a %s checkout: %w: %w", s.cfg.Name, ErrProvider, err)
	}
	s.cfg.Log.Info("checkout started", zap.Int64("user_id", u.ID), zap.String("payment", ref),
		zap.String("item", it.ID), zap.String("checkout", c.ID))
	return c, nil
}

// Outcome is what a webhook delivery did.
type Outcome string

const (
	// Applied: the event moved a payment (Delta says by how much).
	Applied Outcome = "applied"
	// Duplicate: the event was applied before; this delivery changed nothing.
	Duplicate Outcome = "duplicate"
	// Ignored: the event moves no payment of this gateway's.
	Ignored Outcome = "ignored"
)

// Result is what Webhook did.
type Result struct {
	Outcome Outcome
	Event   string
	Delta   int64
}

// Webhook verifies and applies one webhook delivery. ErrSignature (nothing
// changes), store.ErrPaymentMismatch (a paid event not matching its
// checkout: nothing changes), or the store's error (nothing changes: the
// provider delivers again later).
func (s *Service) Webhook(ctx context.Context, header http.Header, body []byte) (Result, error) {
	e, err := s.cfg.Provider.ParseWebhook(header, body)
	if err != nil {
		return Result{}, err
	}
	if e == nil {
		return Result{Outcome: Ignored}, nil
	}
	e.Provider = s.cfg.Name
	log := s.cfg.Log.With(zap.String("event", e.ID), zap.String("kind", string(e.Kind)))
	p, delta, err := s.cfg.Store.ApplyPaymentEvent(ctx, e)
	switch {
	case errors.Is(err, store.ErrConflict):
		log.Info("webhook event applied before: not applied again")
		return Result{Outcome: Duplicate, Event: e.ID}, nil
	case errors.Is(err, store.ErrNotFound):
		// the provider's account may serve other sales than this gateway's
		log.Info("webhook event names no payment of this gateway's: ignored")
		return Result{Outcome: Ignored, Event: e.ID}, nil
	case errors.Is(err, store.ErrPaymentMismatch):
		log.Error("webhook event refused", zap.Error(err))
		return Result{}, err
	case err != nil:
		return Result{}, err
	}
	if delta != 0 {
		s.cfg.Credit(p.UserID, delta)
	}
	log.Info("webhook event applied", zap.String("payment", p.Reference), zap.Int64("user_id", p.UserID),
		zap.Int64("quota_delta", delta), zap.String("status", p.Status))
	return Result{Outcome: Applied, Event: e.ID, Delta: delta}, nil
}

// Payments lists a user's payments, newest first.
func (s *Service) Payments(ctx context.Context, userID int64, limit int) ([]*store.Payment, error) {
	return s.cfg.Store.ListPayments(ctx, userID, limit)
}

// exponent is the digits after the decimal point of a currency's major
// unit: 2 except where ISO 4217 says otherwise (the currencies a card
// processor treats as zero- or three-decimal).
func exponent(currency string) int {
	switch currency {
	case "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf":
		return 0
	case "bhd", "jod", "kwd", "omr", "tnd":
		return 3
	}
	return 2
}

// ParseAmount reads a price in the currency's major unit ("10", "10.5",
// "10.00") as a whole number of its smallest unit, exactly: a digit the
// currency cannot charge is an error, not a rounding.
func ParseAmount(s, currency string) (int64, error) {
	exp := exponent(currency)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.ContainsAny(whole, "+-") || len(frac) > exp || strings.Contains(s, ".") && frac == "" {
		return 0, fmt.Errorf("price %q: a positive amount in %s with at most %d decimals, such as %s", s, strings.ToUpper(currency), exp, FormatAmount(1000*pow10(exp), currency))
	}
	frac += strings.Repeat("0", exp-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n <= 0 || len(whole) > 15 {
		return 0, fmt.Errorf("price %q: a positive amount in %s, such as %s", s, strings.ToUpper(currency), FormatAmount(1000*pow10(exp), currency))
	}
	return n, nil
}

// FormatAmount writes an amount of a currency's smallest unit in its
// major unit ("10.00").
func FormatAmount(amount int64, currency string) string {
	exp := exponent(currency)
	s := strconv.FormatInt(amount, 10)
	if exp == 0 {
		return s
	}
	if len(s) <= exp {
		s = strings.Repeat("0", exp-len(s)+1) + s
	}
	return s[:len(s)-exp] + "." + s[len(s)-exp:]
}

func pow10(n int) int64 {
	v := int64(1)
	for range n {
		v *= 10
	}
	return v
}
