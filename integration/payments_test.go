package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// Self-serve top-up with Stripe Checkout, against a fake Stripe that
// speaks Checkout's wire format and signs its webhooks as Stripe does.

const (
	stripeTestKey    = "sk_test_gateway_integration_key"
	stripeTestSecret = "whsec_gateway_integration_secret"
)

// paymentsConfig is the account configuration with top-up through the
// fake Stripe at base: 10.00 USD for 10 USD of credit, 20.00 USD for 21.
func paymentsConfig(base string, rate int) *caddyfile {
	return accountConfig("on", rate, 1000).
		option(block("payments stripe",
			"secret_key {env.TEST_STRIPE_SECRET_KEY}",
			"webhook_secret {env.TEST_STRIPE_WEBHOOK_SECRET}",
			"api_base "+base,
			"success_url http://127.0.0.1:{{PORT}}/console/topup?paid=1",
			"cancel_url http://127.0.0.1:{{PORT}}/console/topup",
			block("prices", "usd10 10.00 usd 10000000", "usd20 20 USD 21000000"))).
		withSite(
			"@account path /api/user/* /api/admin/* /api/payments/*",
			block("route @account", "gateway_account"),
			"@console path / /console /console/*",
			block("route @console", "gateway_console"),
			"@models path /v1/* /v1beta/*",
			block("route @models", "gateway_auth", "gateway_relay"))
}

// startPayments starts a gateway taking payments through a fresh fake
// Stripe that delivers its webhooks to it.
func startPayments(t *testing.T) (*gatewaytest.Gateway, *gatewaytest.FakeStripe) {
	t.Helper()
	return startPaymentsLimited(t, 1000)
}

// startPaymentsLimited is startPayments with account_rate_limit rate a minute.
func startPaymentsLimited(t *testing.T, rate int) (*gatewaytest.Gateway, *gatewaytest.FakeStripe) {
	t.Helper()
	t.Setenv("TEST_STRIPE_SECRET_KEY", stripeTestKey)
	t.Setenv("TEST_STRIPE_WEBHOOK_SECRET", stripeTestSecret)
	fake := gatewaytest.NewFakeStripe(t, stripeTestKey, stripeTestSecret)
	g := gatewaytest.Start(t, paymentsConfig(fake.BaseURL(), rate).String(), nil)
	fake.SetWebhook(g.URL + "/api/payments/stripe/webhook")
	return g, fake
}

type checkoutAnswer struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

func (c *client) checkout(price string) checkoutAnswer {
	c.t.Helper()
	var co checkoutAnswer
	c.ok(http.MethodPost, "/api/user/topup/checkout", map[string]string{"price": price}).decode(c.t, &co)
	return co
}

func outcome(t *testing.T, d gatewaytest.Delivery) string {
	t.Helper()
	var a struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(d.Body), &a); err != nil {
		t.Fatalf("webhook answered %d %s", d.Status, d.Body)
	}
	return a.Outcome
}

// The whole way of a payment: the price list, a checkout, the fake pays
// and the balance is credited exactly once and spendable at once; the
// same event delivered again, and deliveries whose signature does not
// verify, change nothing; a refund and a dispute debit what they are
// worth; every step is in the audit log.
func TestPaymentsStripeCheckout(t *testing.T) {
	g, fake := startPayments(t)
	alice := loggedIn(t, g, "alice", 0, "user")

	var prices struct {
		Enabled  bool   `json:"enabled"`
		Provider string `json:"provider"`
		Prices   []struct {
			ID, Price, Currency string
			Amount, Units       int64
		} `json:"prices"`
	}
	alice.ok(http.MethodGet, "/api/user/topup/prices", nil).decode(t, &prices)
	if !prices.Enabled || prices.Provider != "stripe" || len(prices.Prices) != 2 ||
		prices.Prices[0].ID != "usd10" || prices.Prices[0].Price != "10.00" || prices.Prices[0].Amount != 1000 || prices.Prices[0].Units != 10_000_000 ||
		prices.Prices[1].ID != "usd20" || prices.Prices[1].Price != "20.00" || prices.Prices[1].Currency != "usd" || prices.Prices[1].Units != 21_000_000 {
		t.Fatalf("price list %+v", prices)
	}
	alice.do(http.MethodPost, "/api/user/topup/checkout", map[string]string{"price": "usd1000"}).apiErr(t, 400, "invalid_price")
	newClient(t, g).do(http.MethodPost, "/api/user/topup/checkout", map[string]string{"price": "usd10"}).apiErr(t, 401, "not_logged_in")

	key := g.AddToken("alice")
	if s := chatOnce(t, g, key, "hello"); s != http.StatusTooManyRequests {
		t.Fatalf("with no balance a request gets %d, want 429", s)
	}
	co := alice.checkout("usd10")
	if !strings.HasPrefix(co.URL, fake.BaseURL()+"/pay/") || co.ID == "" {
		t.Fatalf("checkout %+v", co)
	}
	session := fake.Session(co.ID)
	ref, _ := session["client_reference_id"].(string)
	if session["amount_total"] != int64(1000) || session["currency"] != "usd" || !strings.HasPrefix(ref, "pay_") ||
		session["success_url"] != g.URL+"/console/topup?paid=1" {
		t.Fatalf("session %v", session)
	}
	if got := alice.self().Quota; got != 0 {
		t.Fatalf("a checkout not paid credited %d", got)
	}

	paid, err := fake.Pay(co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paid.Status != http.StatusOK || outcome(t, paid) != "applied" {
		t.Fatalf("paid event answered %d %s", paid.Status, paid.Body)
	}
	if got := alice.self().Quota; got != 10_000_000 {
		t.Fatalf("balance after paying %d, want 10000000", got)
	}
	// spendable at once
	if s := chatOnce(t, g, key, "hello"); s != http.StatusOK {
		t.Fatalf("right after paying a request gets %d", s)
	}
	g.WaitUsage("alice", 1)

	// Stripe delivering it again, or someone replaying it: not applied twice
	again := fake.Resend(paid)
	if again.Status != http.StatusOK || outcome(t, again) != "duplicate" {
		t.Fatalf("replayed event answered %d %s", again.Status, again.Body)
	}
	// a forged or altered delivery: 400, nothing changes
	forged := []byte(strings.Replace(string(paid.Payload), `"amount_total":1000`, `"amount_total":1`, 1))
	for name, d := range map[string]gatewaytest.Delivery{
		"unsigned":       fake.Send(paid.Payload, ""),
		"altered body":   fake.Send(forged, fake.SignatureHeader(time.Now(), paid.Payload)),
		"another secret": fake.Send(paid.Payload, gatewaytest.StripeSignature("whsec_not_the_endpoints", time.Now(), paid.Payload)),
		"too old":        fake.Send(paid.Payload, fake.SignatureHeader(time.Now().Add(-time.Hour), paid.Payload)),
	} {
		if d.Status != http.StatusBadRequest || !strings.Contains(d.Body, "invalid_signature") {
			t.Errorf("%s delivery answered %d %s, want 400 invalid_signature", name, d.Status, d.Body)
		}
	}
	// a delivery past 1 MiB is refused before it is read further
	if d := fake.Send([]byte(`{"id":"evt_big","pad":"`+strings.Repeat("x", 1<<20)+`"}`), fake.SignatureHeader(time.Now(), paid.Payload)); d.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB delivery answered %d %s, want 413", d.Status, d.Body)
	}
	if u := alice.self(); u.Quota+u.UsedQuota != 10_000_000 {
		t.Fatalf("after replays: quota %d + used %d, want 10000000 in all", u.Quota, u.UsedQuota)
	}

	// refunds and disputes take back what they are worth, exactly
	bob := loggedIn(t, g, "bob", 0, "user")
	bco := bob.checkout("usd20")
	if d, err := fake.Pay(bco.ID); err != nil || d.Status != http.StatusOK {
		t.Fatalf("bob's payment: %v %+v", err, d)
	}
	if got := bob.self().Quota; got != 21_000_000 {
		t.Fatalf("bob's balance %d, want 21000000", got)
	}
	// 5.00 of 20.00 is a quarter of 21,000,000 units
	if d, err := fake.Refund(bco.ID, 500); err != nil || d.Status != http.StatusOK || outcome(t, d) != "applied" {
		t.Fatalf("refund: %v %+v", err, d)
	}
	if got := bob.self().Quota; got != 15_750_000 {
		t.Fatalf("after a 5.00 refund: %d, want 15750000", got)
	}
	// a dispute of all of it takes what is left, not more
	dispute, err := fake.Dispute(bco.ID, 2000)
	if err != nil || dispute.Status != http.StatusOK || outcome(t, dispute) != "applied" {
		t.Fatalf("dispute: %v %+v", err, dispute)
	}
	if got := bob.self().Quota; got != 0 {
		t.Fatalf("after the dispute: %d, want 0", got)
	}
	if d := fake.Resend(dispute); outcome(t, d) != "duplicate" {
		t.Fatalf("a replayed dispute: %s", d.Body)
	}
	if got := bob.self().Quota; got != 0 {
		t.Fatalf("after a replayed dispute: %d, want 0", got)
	}

	var payments []store.Payment
	bob.ok(http.MethodGet, "/api/user/topup/payments", nil).decode(t, &payments)
	if len(payments) != 1 || payments[0].Status != store.PaymentDisputed || payments[0].Refunded != 5_250_000 || payments[0].Disputed != 15_750_000 {
		t.Fatalf("bob's payments %+v", payments)
	}
	admin := loggedIn(t, g, "boss", 0, "admin")
	var all []store.Payment
	admin.ok(http.MethodGet, "/api/admin/payments", nil).decode(t, &all)
	if len(all) != 2 || all[0].Item != "usd20" || all[1].Item != "usd10" || all[1].Status != store.PaymentPaid {
		t.Fatalf("every payment, as an administrator sees them: %+v", all)
	}
	alice.do(http.MethodGet, "/api/admin/payments", nil).apiErr(t, http.StatusForbidden, "admin_only")
	// the user page's balance history has the payment, the refund and the
	// dispute with what each moved
	var history struct {
		Data []struct {
			Kind   string
			Amount int64
			Actor  string
		}
	}
	admin.ok(http.MethodGet, fmt.Sprintf("/api/admin/users/%d/balance", bob.self().ID), nil).decode(t, &history)
	moved := map[string]int64{}
	for _, e := range history.Data {
		if e.Kind == "payment" || e.Kind == "refund" || e.Kind == "dispute" {
			moved[e.Kind] += e.Amount
			if e.Actor != "stripe" {
				t.Errorf("a %s by %q, want stripe", e.Kind, e.Actor)
			}
		}
	}
	if moved["payment"] != 21_000_000 || moved["refund"] != -5_250_000 || moved["dispute"] != -15_750_000 {
		t.Fatalf("bob's balance history moved %v: %+v", moved, history.Data)
	}
	entries, err := g.Store().ListAudit(context.Background(), store.AuditFilter{Action: "payment.", Target: "user:" + strconv.FormatInt(bob.self().ID, 10)})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range entries {
		steps = append(steps, e.Action+" by "+e.Actor)
	}
	if strings.Join(steps, ", ") != "payment.disputed by stripe, payment.refunded by stripe, payment.paid by stripe, payment.checkout by bob" {
		t.Fatalf("bob's audit entries: %q", steps)
	}
	if strings.Contains(g.Logs(), stripeTestKey) || strings.Contains(g.Logs(), stripeTestSecret) {
		t.Fatal("a Stripe secret reached the gateway's log")
	}
}

// A database that refuses the payment's last write (its audit entry)
// keeps none of it: no credit, no event recorded; Stripe's next delivery
// of the event applies it, once.
func TestPaymentsStripeDatabaseRefuses(t *testing.T) {
	g, fake := startPayments(t)
	carol := loggedIn(t, g, "carol", 0, "user")
	co := carol.checkout("usd10")
	restore := g.RefuseInserts("audit_log", "NEW.action = 'payment.paid'")
	d, err := fake.Pay(co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != http.StatusInternalServerError {
		t.Fatalf("a delivery the database refused answered %d %s, want 500 (so that Stripe delivers it again)", d.Status, d.Body)
	}
	if got := carol.self().Quota; got != 0 {
		t.Fatalf("half-applied payment: balance %d, want 0", got)
	}
	ref, _ := fake.Session(co.ID)["client_reference_id"].(string)
	if p, err := g.Store().PaymentByReference(context.Background(), ref); err != nil || p.Status != store.PaymentPending {
		t.Fatalf("payment after the refusal: %+v, %v; want pending", p, err)
	}
	restore()
	if again := fake.Resend(d); again.Status != http.StatusOK || outcome(t, again) != "applied" {
		t.Fatalf("the next delivery answered %d %s", again.Status, again.Body)
	}
	if again := fake.Resend(d); outcome(t, again) != "duplicate" {
		t.Fatalf("the one after: %s", again.Body)
	}
	if got := carol.self().Quota; got != 10_000_000 {
		t.Fatalf("balance %d, want 10000000", got)
	}
}

// Each checkout is a stored payment and a call to Stripe: a user gets
// account_rate_limit of them a minute, and the one past it is a 429 that
// stores nothing and calls no one.
func TestPaymentsCheckoutsBounded(t *testing.T) {
	g, fake := startPaymentsLimited(t, 2)
	dan := loggedIn(t, g, "dan", 0, "user")
	dan.checkout("usd10")
	dan.checkout("usd20")
	dan.do(http.MethodPost, "/api/user/topup/checkout", map[string]string{"price": "usd10"}).apiErr(t, http.StatusTooManyRequests, "rate_limited")
	if n := fake.Creates(); n != 2 {
		t.Fatalf("Stripe was asked for %d sessions, want 2", n)
	}
	list, err := g.Store().ListPayments(context.Background(), dan.self().ID, 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("stored payments %d, %v; want 2", len(list), err)
	}
}

// TestInstancesPaymentsOnce: on two instances of one PostgreSQL database,
// a payment checked out on A and delivered to B is spendable on A at once
// (with a 10-minute key cache: only the credit's announcement can tell A);
// a refund delivered to both at the same moment is applied by one, and
// the other answers duplicate.
func TestInstancesPaymentsOnce(t *testing.T) {
	t.Setenv("TEST_STRIPE_SECRET_KEY", stripeTestKey)
	t.Setenv("TEST_STRIPE_WEBHOOK_SECRET", stripeTestSecret)
	fake := gatewaytest.NewFakeStripe(t, stripeTestKey, stripeTestSecret)
	gws := gatewaytest.StartInstances(t, 2, paymentsConfig(fake.BaseURL(), 1000).option("token_cache_ttl 10m").String(), nil)
	hook := func(g *gatewaytest.Gateway) string { return g.URL + "/api/payments/stripe/webhook" }
	key := gws[0].AddUser("ivy", 0)
	ivy := newClient(t, gws[0])
	ivy.login("ivy")
	if s := chatOnce(t, gws[0], key, "hello"); s != http.StatusTooManyRequests {
		t.Fatalf("with no balance A answers %d, want 429", s)
	}
	co := ivy.checkout("usd10")
	fake.SetWebhook(hook(gws[1]))
	if d, err := fake.Pay(co.ID); err != nil || outcome(t, d) != "applied" {
		t.Fatalf("paid on B: %v %+v", err, d)
	}
	deadline := time.Now().Add(heard)
	for chatOnce(t, gws[0], key, "hello") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("A did not hear of the payment B applied within %s", heard)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// the refund's event, held, then delivered to both at once
	fake.SetWebhook("http://127.0.0.1:1/nowhere")
	held, err := fake.Refund(co.ID, 1000)
	if err != nil || held.Status != 0 {
		t.Fatalf("held refund: %v %+v", err, held)
	}
	answers := make(chan gatewaytest.Delivery, 2)
	for _, g := range gws {
		go func() { answers <- fake.ResendTo(hook(g), held) }()
	}
	got := []string{outcome(t, <-answers), outcome(t, <-answers)}
	if !(got[0] == "applied" && got[1] == "duplicate" || got[0] == "duplicate" && got[1] == "applied") {
		t.Fatalf("one refund delivered to both instances: %q, want one applied and one duplicate", got)
	}
	gws[0].WaitUsage("ivy", 1)
	if u := ivy.self(); u.Quota+u.UsedQuota != 0 {
		t.Fatalf("after the whole refund: quota %d + used %d, want 0 in all (taken back once)", u.Quota, u.UsedQuota)
	}
}
