package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/payments"
	"github.com/caddy-model-gateway/gateway/store"
)

const (
	testKey    = "sk_test_provider_unit_key"
	testSecret = "whsec_provider_unit_secret"
)

func provision(t *testing.T, base string) *Provider {
	t.Helper()
	t.Setenv("TEST_STRIPE_KEY", testKey)
	t.Setenv("TEST_STRIPE_WHSEC", testSecret)
	p := &Provider{SecretKey: "{env.TEST_STRIPE_KEY}", WebhookSecret: "{env.TEST_STRIPE_WHSEC}", APIBase: base}
	if err := p.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// A checkout is a payment-mode Checkout Session for the item, priced
// inline, carrying the payment's reference; a retried create (the same
// reference) makes no second session.
func TestCreateCheckout(t *testing.T) {
	fake := gatewaytest.NewFakeStripe(t, testKey, testSecret)
	p := provision(t, fake.BaseURL())
	req := payments.CheckoutRequest{Reference: "pay_abc", UserID: 7,
		Item:       payments.Item{ID: "usd10", Amount: 1000, Currency: "usd", Units: 10_000_000},
		SuccessURL: "https://gw.example/console/topup?paid=1", CancelURL: "https://gw.example/console/topup"}
	c, err := p.CreateCheckout(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "cs_test_") || c.URL != fake.BaseURL()+"/pay/"+c.ID {
		t.Fatalf("checkout %+v", c)
	}
	s := fake.Session(c.ID)
	if s["amount_total"] != int64(1000) || s["currency"] != "usd" || s["client_reference_id"] != "pay_abc" ||
		s["success_url"] != req.SuccessURL || s["cancel_url"] != req.CancelURL {
		t.Fatalf("session %v", s)
	}
	if meta := s["metadata"].(map[string]string); meta["gateway_payment"] != "pay_abc" || meta["gateway_user"] != "7" {
		t.Fatalf("metadata %v", meta)
	}
	again, err := p.CreateCheckout(context.Background(), req)
	if err != nil || again.ID != c.ID || fake.Creates() != 1 {
		t.Fatalf("retried create: %+v, %v, %d sessions", again, err, fake.Creates())
	}
}

// Stripe's refusal is an error that says what Stripe said, and never the key.
func TestCreateCheckoutRefused(t *testing.T) {
	fake := gatewaytest.NewFakeStripe(t, "sk_test_another_key_entirely", testSecret)
	p := provision(t, fake.BaseURL())
	_, err := p.CreateCheckout(context.Background(), payments.CheckoutRequest{Reference: "pay_x",
		Item: payments.Item{ID: "a", Amount: 1, Currency: "usd", Units: 1}, SuccessURL: "https://a", CancelURL: "https://b"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), testKey) {
		t.Fatalf("refused checkout: %v", err)
	}
}

func event(t *testing.T, typ string, object map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "api_version": gatewaytest.FakeStripeAPIVersion,
		"created": time.Now().Unix(), "type": typ, "data": map[string]any{"object": object}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signed(payload []byte, secret string, at time.Time) http.Header {
	return http.Header{"Stripe-Signature": {gatewaytest.StripeSignature(secret, at, payload)}}
}

// Each event that moves a payment is read from Stripe's objects; others,
// and a session completed but not yet paid, move nothing.
func TestParseWebhookEvents(t *testing.T) {
	p := provision(t, "")
	for _, tt := range []struct {
		name, typ string
		object    map[string]any
		want      *store.PaymentEvent
	}{
		{"paid", "checkout.session.completed", map[string]any{"id": "cs_1", "object": "checkout.session", "payment_status": "paid",
			"client_reference_id": "pay_1", "amount_total": 1000, "currency": "usd", "payment_intent": "pi_1"},
			&store.PaymentEvent{ID: "evt_1", Kind: store.PaymentEventPaid, Reference: "pay_1", Checkout: "cs_1", Charge: "pi_1", Amount: 1000, Currency: "usd"}},
		{"delayed method paid", "checkout.session.async_payment_succeeded", map[string]any{"id": "cs_2", "object": "checkout.session",
			"payment_status": "paid", "client_reference_id": "pay_2", "amount_total": 500, "currency": "eur", "payment_intent": "pi_2"},
			&store.PaymentEvent{ID: "evt_1", Kind: store.PaymentEventPaid, Reference: "pay_2", Checkout: "cs_2", Charge: "pi_2", Amount: 500, Currency: "eur"}},
		{"completed unpaid", "checkout.session.completed", map[string]any{"id": "cs_3", "object": "checkout.session",
			"payment_status": "unpaid", "client_reference_id": "pay_3", "amount_total": 500, "currency": "usd"}, nil},
		{"refunded", "charge.refunded", map[string]any{"id": "ch_1", "object": "charge", "amount": 1000, "amount_refunded": 400,
			"currency": "usd", "payment_intent": "pi_1", "refunded": false},
			&store.PaymentEvent{ID: "evt_1", Kind: store.PaymentEventRefunded, Charge: "pi_1", Amount: 400, Currency: "usd"}},
		{"disputed", "charge.dispute.created", map[string]any{"id": "dp_1", "object": "dispute", "amount": 1000, "charge": "ch_1",
			"currency": "usd", "payment_intent": "pi_1", "status": "needs_response"},
			&store.PaymentEvent{ID: "evt_1", Kind: store.PaymentEventDisputed, Charge: "pi_1", Amount: 1000, Currency: "usd"}},
		{"other type", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			payload := event(t, tt.typ, tt.object)
			got, err := p.ParseWebhook(signed(payload, testSecret, time.Now()), payload)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A delivery whose signature is missing, made with another secret, of
// another body, malformed or older than the tolerance is ErrSignature.
func TestParseWebhookSignatures(t *testing.T) {
	p := provision(t, "")
	p.Tolerance = caddy.Duration(time.Minute)
	payload := event(t, "checkout.session.completed", map[string]any{"id": "cs_1", "payment_status": "paid",
		"client_reference_id": "pay_1", "amount_total": 1000, "currency": "usd"})
	for name, h := range map[string]http.Header{
		"none":           {},
		"another secret": signed(payload, "whsec_wrong", time.Now()),
		"another body":   signed(append([]byte(" "), payload...), testSecret, time.Now()),
		"malformed":      {"Stripe-Signature": {"v1=abc"}},
		"too old":        signed(payload, testSecret, time.Now().Add(-2*time.Minute)),
	} {
		if _, err := p.ParseWebhook(h, payload); !errors.Is(err, payments.ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
	if _, err := p.ParseWebhook(signed(payload, testSecret, time.Now()), payload); err != nil {
		t.Fatalf("the good signature: %v", err)
	}
}

// Empty secrets are refused at provisioning with the setting's name, not
// its value.
func TestProvisionNeedsSecrets(t *testing.T) {
	t.Setenv("TEST_STRIPE_EMPTY", "")
	for _, p := range []*Provider{
		{SecretKey: "{env.TEST_STRIPE_EMPTY}", WebhookSecret: "whsec_x"},
		{SecretKey: "sk_test_x", WebhookSecret: "{env.TEST_STRIPE_EMPTY}"},
	} {
		if err := p.Provision(caddy.Context{}); err == nil || !strings.Contains(err.Error(), "{env.TEST_STRIPE_EMPTY}") {
			t.Errorf("provision %+v: %v", p, err)
		}
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	var p Provider
	d := caddyfile.NewTestDispenser(`stripe {
		secret_key {env.STRIPE_SECRET_KEY}
		webhook_secret {env.STRIPE_WEBHOOK_SECRET}
		api_base http://127.0.0.1:9
		tolerance 2m
		timeout 5s
	}`)
	if err := p.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if p.SecretKey != "{env.STRIPE_SECRET_KEY}" || p.WebhookSecret != "{env.STRIPE_WEBHOOK_SECRET}" || p.APIBase != "http://127.0.0.1:9" ||
		p.Tolerance != caddy.Duration(2*time.Minute) || p.Timeout != caddy.Duration(5*time.Second) {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{"stripe {\n secret_key\n}", "stripe {\n color blue\n}", "stripe extra", "stripe {\n tolerance soon\n}"} {
		var p Provider
		if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
