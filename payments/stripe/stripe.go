// Package stripe is the Stripe payment provider (Caddy module
// gateway.payments.stripe): a top-up is a Stripe Checkout Session in
// payment mode for one price-list item, and the Checkout Session, charge
// and dispute events of its signed webhook move it. stripe-go makes the
// session and verifies the Stripe-Signature header; nothing of Stripe's
// shape leaves this package.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/caddy-model-gateway/gateway/payments"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is the Stripe payment provider. Its secrets are read through
// Caddy's replacer when it is provisioned, so the config (and the admin
// API that shows it) holds only "{env.NAME}" or "{file.PATH}".
type Provider struct {
	// SecretKey is the account's secret API key (sk_live_..., or a
	// restricted key that may write Checkout Sessions).
	SecretKey string `json:"secret_key,omitempty"`
	// WebhookSecret is the signing secret of the webhook endpoint
	// (whsec_...), which Stripe shows when the endpoint is made.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// APIBase is where the API is called; empty: Stripe's own.
	APIBase string `json:"api_base,omitempty"`
	// Tolerance is how old a signed delivery may be: older ones are
	// refused as replays. Default 5m, stripe-go's.
	Tolerance caddy.Duration `json:"tolerance,omitempty"`
	// Timeout bounds one API call. Default 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	client        *stripego.Client
	webhookSecret string
}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.payments.stripe",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision reads the secrets and makes the API client.
func (p *Provider) Provision(caddy.Context) error {
	repl := caddy.NewReplacer()
	key := strings.TrimSpace(repl.ReplaceAll(p.SecretKey, ""))
	p.webhookSecret = strings.TrimSpace(repl.ReplaceAll(p.WebhookSecret, ""))
	// never the values in an error: only which setting is empty
	if key == "" {
		return fmt.Errorf("payments stripe: secret_key %s is empty: set it in the gateway's environment or read it from a file", p.SecretKey)
	}
	if p.webhookSecret == "" {
		return fmt.Errorf("payments stripe: webhook_secret %s is empty: set the webhook endpoint's signing secret (whsec_...)", p.WebhookSecret)
	}
	timeout := time.Duration(p.Timeout)
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	cfg := &stripego.BackendConfig{
		HTTPClient: &http.Client{Timeout: timeout},
		// the gateway logs what matters itself, without Stripe's request lines
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if base := strings.TrimRight(repl.ReplaceAll(p.APIBase, ""), "/"); base != "" {
		cfg.URL = stripego.String(base)
	}
	p.client = stripego.NewClient(key, stripego.WithBackends(stripego.NewBackendsWithConfig(cfg)))
	return nil
}

// CreateCheckout implements payments.Provider: a Checkout Session in
// payment mode with the item as its one line, priced inline. The payment's
// reference travels as client_reference_id (which the completed session's
// event carries back) and in the metadata of the session and of its
// payment intent, where an operator looking at Stripe's dashboard finds it.
// The reference is the idempotency key: a retried create makes one session.
func (p *Provider) CreateCheckout(ctx context.Context, c payments.CheckoutRequest) (*payments.Checkout, error) {
	meta := map[string]string{"gateway_payment": c.Reference, "gateway_user": strconv.FormatInt(c.UserID, 10)}
	params := &stripego.CheckoutSessionCreateParams{
		Mode:              stripego.String(string(stripego.CheckoutSessionModePayment)),
		ClientReferenceID: stripego.String(c.Reference),
		SuccessURL:        stripego.String(c.SuccessURL),
		CancelURL:         stripego.String(c.CancelURL),
		LineItems: []*stripego.CheckoutSessionCreateLineItemParams{{
			Quantity: stripego.Int64(1),
			PriceData: &stripego.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:   stripego.String(c.Item.Currency),
				UnitAmount: stripego.Int64(c.Item.Amount),
				ProductData: &stripego.CheckoutSessionCreateLineItemPriceDataProductDataParams{
					Name: stripego.String("Gateway credit: " + c.Item.ID),
				},
			},
		}},
		Metadata:          meta,
		PaymentIntentData: &stripego.CheckoutSessionCreatePaymentIntentDataParams{Metadata: meta},
	}
	params.SetIdempotencyKey(c.Reference)
	s, err := p.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return nil, checkoutError(err)
	}
	if s.URL == "" {
		return nil, errors.New("stripe answered a checkout session without a url")
	}
	return &payments.Checkout{ID: s.ID, URL: s.URL}, nil
}

// checkoutError keeps what Stripe said and drops the rest: stripe-go's
// error text is the whole JSON answer.
func checkoutError(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		return fmt.Errorf("stripe refused the checkout session (HTTP %d, %s): %s", se.HTTPStatusCode, se.Type, se.Msg)
	}
	return err
}

// ParseWebhook implements payments.Provider. The signature is checked by
// stripe-go on the body as received, within Tolerance; the event's API
// version is not held against it, as the fields read here are the same in
// every version since 2020.
func (p *Provider) ParseWebhook(header http.Header, body []byte) (*store.PaymentEvent, error) {
	ev, err := webhook.ConstructEventWithOptions(body, header.Get("Stripe-Signature"), p.webhookSecret,
		webhook.ConstructEventOptions{Tolerance: time.Duration(p.Tolerance), IgnoreAPIVersionMismatch: true})
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
		errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld):
		return nil, fmt.Errorf("%w: %w", payments.ErrSignature, err)
	case err != nil:
		return nil, fmt.Errorf("stripe webhook: %w", err)
	}
	return parseEvent(ev)
}

// parseEvent reads the events that move a payment.
func parseEvent(ev stripego.Event) (*store.PaymentEvent, error) {
	if ev.ID == "" || ev.Data == nil {
		return nil, errors.New("stripe webhook: an event without an id or data")
	}
	out := &store.PaymentEvent{ID: ev.ID}
	switch ev.Type {
	case stripego.EventTypeCheckoutSessionCompleted, stripego.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		var s stripego.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &s); err != nil {
			return nil, fmt.Errorf("stripe webhook %s: %w", ev.Type, err)
		}
		// a delayed payment method completes the session unpaid; its
		// async_payment_succeeded event pays it
		if s.PaymentStatus != stripego.CheckoutSessionPaymentStatusPaid || s.ClientReferenceID == "" {
			return nil, nil
		}
		out.Kind, out.Reference, out.Checkout = store.PaymentEventPaid, s.ClientReferenceID, s.ID
		out.Amount, out.Currency = s.AmountTotal, string(s.Currency)
		if s.PaymentIntent != nil {
			out.Charge = s.PaymentIntent.ID
		}
	case stripego.EventTypeChargeRefunded:
		var c stripego.Charge
		if err := json.Unmarshal(ev.Data.Raw, &c); err != nil {
			return nil, fmt.Errorf("stripe webhook %s: %w", ev.Type, err)
		}
		if c.PaymentIntent == nil {
			return nil, nil // not a Checkout payment
		}
		out.Kind, out.Charge, out.Amount, out.Currency = store.PaymentEventRefunded, c.PaymentIntent.ID, c.AmountRefunded, string(c.Currency)
	case stripego.EventTypeChargeDisputeCreated:
		var d stripego.Dispute
		if err := json.Unmarshal(ev.Data.Raw, &d); err != nil {
			return nil, fmt.Errorf("stripe webhook %s: %w", ev.Type, err)
		}
		if d.PaymentIntent == nil {
			return nil, nil
		}
		out.Kind, out.Charge, out.Amount, out.Currency = store.PaymentEventDisputed, d.PaymentIntent.ID, d.Amount, string(d.Currency)
	default:
		return nil, nil
	}
	return out, nil
}

// UnmarshalCaddyfile reads the provider's options:
//
//	stripe {
//		secret_key {env.STRIPE_SECRET_KEY}
//		webhook_secret {env.STRIPE_WEBHOOK_SECRET}
//		api_base <url>
//		tolerance <duration>
//		timeout <duration>
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the provider's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.Errf("payments stripe: %s takes one value", opt)
		}
		switch opt {
		case "secret_key":
			p.SecretKey = v
		case "webhook_secret":
			p.WebhookSecret = v
		case "api_base":
			p.APIBase = v
		case "tolerance", "timeout":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("payments stripe: %s must be a positive duration, not %q", opt, v)
			}
			if opt == "tolerance" {
				p.Tolerance = caddy.Duration(dur)
			} else {
				p.Timeout = caddy.Duration(dur)
			}
		default:
			return d.Errf("payments stripe: unrecognized option %q (known: secret_key, webhook_secret, api_base, tolerance, timeout)", opt)
		}
	}
	return nil
}

// Interface guards.
var (
	_ payments.Provider     = (*Provider)(nil)
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
)
