package gatewaytest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeStripeAPIVersion is the API version the fake's events carry: the one
// stripe-go v82 is pinned to.
const FakeStripeAPIVersion = "2025-08-27.basil"

// FakeStripe is Stripe Checkout as its API reference describes it:
// POST /v1/checkout/sessions takes a form-encoded body (mode=payment,
// line_items[0][price_data][currency|unit_amount|product_data][name],
// line_items[0][quantity], success_url, cancel_url, client_reference_id,
// metadata[...], payment_intent_data[metadata][...]) with "Authorization:
// Bearer <secret key>", honours Idempotency-Key, and answers a
// checkout.session object (status open, payment_status unpaid) whose url is
// the fake's hosted page. Errors are Stripe's {"error": {type, message,
// param}}: 401 for a missing or wrong key, 400 for a bad body.
//
// The hosted page (GET /pay/{id}) shows the amount and a Pay button; paying
// (POST /pay/{id}) completes the session (payment_status paid, a
// payment_intent) and delivers checkout.session.completed to the webhook
// URL, signed as Stripe signs: a Stripe-Signature header
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<payload>" keyed with the
// endpoint's secret>", then sends the browser to success_url. Refund and
// Dispute deliver charge.refunded and charge.dispute.created for a paid
// session. Every delivery is kept (Deliveries) and can be sent again
// (Resend), as Stripe retries.
type FakeStripe struct {
	SecretKey, WebhookSecret string

	srv *httptest.Server
	mu  sync.Mutex
	// webhook is where events are delivered
	webhook    string
	sessions   map[string]*checkoutSession
	idempotent map[string]string // Idempotency-Key to session id
	deliveries []Delivery
	creates    int
}

type checkoutSession struct {
	obj      map[string]any
	refunded int64
	charge   string
}

// Delivery is one webhook delivery the fake made.
type Delivery struct {
	EventID, Type string
	Payload       []byte
	Status        int    // the gateway's answer
	Body          string // and its body
}

// NewFakeStripe starts a fake Stripe that takes secretKey and signs its
// webhooks with webhookSecret.
func NewFakeStripe(t testing.TB, secretKey, webhookSecret string) *FakeStripe {
	Secret(secretKey)
	Secret(webhookSecret)
	f := &FakeStripe{SecretKey: secretKey, WebhookSecret: webhookSecret, sessions: map[string]*checkoutSession{}, idempotent: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/checkout/sessions", f.createSession)
	mux.HandleFunc("GET /pay/{id}", f.page)
	mux.HandleFunc("POST /pay/{id}", f.pay)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// BaseURL is the API base (api_base in the Caddyfile).
func (f *FakeStripe) BaseURL() string { return f.srv.URL }

// SetWebhook sets where events are delivered: the gateway's webhook URL.
func (f *FakeStripe) SetWebhook(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.webhook = url
}

// Creates is how many checkout sessions were created (idempotent replays
// not counted).
func (f *FakeStripe) Creates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates
}

// Deliveries are the webhook deliveries made so far, in order.
func (f *FakeStripe) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Delivery(nil), f.deliveries...)
}

// Session returns a session as the API shows it.
func (f *FakeStripe) Session(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sessions[id]; ok {
		return s.obj
	}
	return nil
}

func stripeError(w http.ResponseWriter, status int, typ, param, msg string) {
	e := map[string]any{"type": typ, "message": msg}
	if param != "" {
		e["param"] = param
	}
	w.Header().Set("Request-Id", "req_"+fakeStripeID())
	writeJSONStatus(w, status, map[string]any{"error": e})
}

func fakeStripeID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *FakeStripe) createSession(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.SecretKey {
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided.")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid request: the body must be form-encoded.")
		return
	}
	if err := r.ParseForm(); err != nil {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid request: "+err.Error())
		return
	}
	form := r.PostForm
	for _, p := range []string{"mode", "success_url", "line_items[0][price_data][currency]",
		"line_items[0][price_data][unit_amount]", "line_items[0][price_data][product_data][name]", "line_items[0][quantity]"} {
		if form.Get(p) == "" {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", p, "Missing required param: "+p+".")
			return
		}
	}
	if form.Get("mode") != "payment" {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "mode", "Invalid mode: the fake makes payment sessions only.")
		return
	}
	amount, err := strconv.ParseInt(form.Get("line_items[0][price_data][unit_amount]"), 10, 64)
	qty, err2 := strconv.ParseInt(form.Get("line_items[0][quantity]"), 10, 64)
	if err != nil || err2 != nil || amount < 1 || qty < 1 {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "line_items[0][price_data][unit_amount]", "Invalid integer.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if id, ok := f.idempotent[key]; ok {
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSONStatus(w, http.StatusOK, f.sessions[id].obj)
			return
		}
	}
	f.creates++
	id := "cs_test_" + fakeStripeID()
	meta := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok {
			meta[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	obj := map[string]any{
		"id": id, "object": "checkout.session", "mode": "payment", "status": "open", "payment_status": "unpaid",
		"amount_subtotal": amount * qty, "amount_total": amount * qty, "currency": form.Get("line_items[0][price_data][currency]"),
		"client_reference_id": nullable(form.Get("client_reference_id")), "success_url": form.Get("success_url"),
		"cancel_url": nullable(form.Get("cancel_url")), "metadata": meta, "payment_intent": nil, "livemode": false,
		"created": time.Now().Unix(), "expires_at": time.Now().Add(24 * time.Hour).Unix(),
		"url":  f.srv.URL + "/pay/" + id,
		"name": form.Get("line_items[0][price_data][product_data][name]"),
	}
	f.sessions[id] = &checkoutSession{obj: obj}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		f.idempotent[key] = id
	}
	writeJSONStatus(w, http.StatusOK, obj)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// page is the hosted checkout page.
func (f *FakeStripe) page(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	s, ok := f.sessions[r.PathValue("id")]
	var obj map[string]any
	if ok {
		obj = s.obj
	}
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><html><head><meta name="viewport" content="width=device-width"><title>Fake Checkout</title></head>
<body><h1>Fake Checkout</h1><p id="item">%s</p><p id="amount">%d %s</p>
<form method="post"><button id="pay" type="submit">Pay</button></form>
<a id="cancel" href="%s">Cancel</a></body></html>`, html.EscapeString(fmt.Sprint(obj["name"])), obj["amount_total"], obj["currency"],
		html.EscapeString(fmt.Sprint(obj["cancel_url"])))
}

// pay completes a session, delivers checkout.session.completed and sends
// the browser to success_url.
func (f *FakeStripe) pay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	s, ok := f.sessions[id]
	if !ok || s.obj["status"] != "open" {
		f.mu.Unlock()
		http.Error(w, "no open session", http.StatusNotFound)
		return
	}
	s.charge = "pi_" + fakeStripeID()
	s.obj["status"], s.obj["payment_status"], s.obj["payment_intent"] = "complete", "paid", s.charge
	obj := cloneObject(s.obj)
	f.mu.Unlock()
	f.Deliver("checkout.session.completed", obj)
	http.Redirect(w, r, fmt.Sprint(obj["success_url"]), http.StatusSeeOther)
}

// Pay completes a session as its page's Pay button does, without a
// browser, and returns the delivery.
func (f *FakeStripe) Pay(id string) (Delivery, error) {
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		Post(f.srv.URL+"/pay/"+id, "application/x-www-form-urlencoded", nil)
	if err != nil {
		return Delivery{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return Delivery{}, fmt.Errorf("pay %s: %s", id, resp.Status)
	}
	d := f.Deliveries()
	return d[len(d)-1], nil
}

func cloneObject(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Refund refunds amount more of a paid session's payment and delivers
// charge.refunded, whose charge carries the running total refunded.
func (f *FakeStripe) Refund(id string, amount int64) (Delivery, error) {
	f.mu.Lock()
	s, ok := f.sessions[id]
	if !ok || s.charge == "" {
		f.mu.Unlock()
		return Delivery{}, fmt.Errorf("refund: session %s is not paid", id)
	}
	s.refunded += amount
	total := s.obj["amount_total"].(int64)
	charge := map[string]any{"id": "ch_" + strings.TrimPrefix(s.charge, "pi_"), "object": "charge", "amount": total,
		"amount_captured": total, "amount_refunded": s.refunded, "currency": s.obj["currency"], "payment_intent": s.charge,
		"paid": true, "captured": true, "refunded": s.refunded >= total, "status": "succeeded", "livemode": false}
	f.mu.Unlock()
	return f.Deliver("charge.refunded", charge), nil
}

// Dispute opens a dispute of amount on a paid session's payment and
// delivers charge.dispute.created.
func (f *FakeStripe) Dispute(id string, amount int64) (Delivery, error) {
	f.mu.Lock()
	s, ok := f.sessions[id]
	if !ok || s.charge == "" {
		f.mu.Unlock()
		return Delivery{}, fmt.Errorf("dispute: session %s is not paid", id)
	}
	dispute := map[string]any{"id": "dp_" + fakeStripeID(), "object": "dispute", "amount": amount,
		"charge": "ch_" + strings.TrimPrefix(s.charge, "pi_"), "currency": s.obj["currency"], "payment_intent": s.charge,
		"reason": "fraudulent", "status": "needs_response", "livemode": false, "created": time.Now().Unix()}
	f.mu.Unlock()
	return f.Deliver("charge.dispute.created", dispute), nil
}

// Deliver sends a new event of typ about object to the webhook, signed.
func (f *FakeStripe) Deliver(typ string, object map[string]any) Delivery {
	ev := map[string]any{"id": "evt_" + fakeStripeID(), "object": "event", "api_version": FakeStripeAPIVersion,
		"created": time.Now().Unix(), "data": map[string]any{"object": object}, "livemode": false, "pending_webhooks": 1,
		"request": map[string]any{"id": nil, "idempotency_key": nil}, "type": typ}
	payload, _ := json.Marshal(ev)
	return f.send(ev["id"].(string), typ, payload, f.SignatureHeader(time.Now(), payload))
}

// Resend delivers an earlier event again, freshly signed: what Stripe
// does when it retries, and what a replay looks like.
func (f *FakeStripe) Resend(d Delivery) Delivery {
	return f.send(d.EventID, d.Type, d.Payload, f.SignatureHeader(time.Now(), d.Payload))
}

// ResendTo delivers an earlier event again, freshly signed, to url
// rather than the webhook: to one instance of several.
func (f *FakeStripe) ResendTo(url string, d Delivery) Delivery {
	return f.sendTo(url, d.EventID, d.Type, d.Payload, f.SignatureHeader(time.Now(), d.Payload))
}

// Send delivers payload with the given Stripe-Signature header ("" for
// none): for tests of bad signatures.
func (f *FakeStripe) Send(payload []byte, signature string) Delivery {
	return f.send("", "", payload, signature)
}

// SignatureHeader is the Stripe-Signature header of payload sent at t.
func (f *FakeStripe) SignatureHeader(t time.Time, payload []byte) string {
	return StripeSignature(f.WebhookSecret, t, payload)
}

// StripeSignature signs payload as Stripe signs a webhook at t.
func StripeSignature(secret string, t time.Time, payload []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(payload)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

func (f *FakeStripe) send(id, typ string, payload []byte, signature string) Delivery {
	f.mu.Lock()
	url := f.webhook
	f.mu.Unlock()
	return f.sendTo(url, id, typ, payload, signature)
}

func (f *FakeStripe) sendTo(url, id, typ string, payload []byte, signature string) Delivery {
	d := Delivery{EventID: id, Type: typ, Payload: payload}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
	if err == nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		if signature != "" {
			req.Header.Set("Stripe-Signature", signature)
		}
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			d.Status, d.Body = resp.StatusCode, string(body)
		}
	}
	if err != nil {
		d.Body = err.Error()
	}
	f.mu.Lock()
	f.deliveries = append(f.deliveries, d)
	f.mu.Unlock()
	return d
}
