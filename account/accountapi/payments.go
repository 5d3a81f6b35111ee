package accountapi

import (
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/payments"
	"github.com/caddy-model-gateway/gateway/store"
)

// Self-serve top-up: the price list, a checkout at the payment provider,
// the user's payments, and the provider's webhook, which is the only
// route here that takes no login: its signature is its credential.

// webhookPrefix is where payment providers deliver their events:
// /api/payments/<provider>/webhook.
const webhookPrefix = "/api/payments/"

// maxWebhookBody bounds a webhook delivery; Stripe's events of the types
// read here are a few KiB.
const maxWebhookBody = 1 << 20

func (h *Handler) paymentRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /api/user/topup/prices", h.user(h.topupPrices))
	m.HandleFunc("POST /api/user/topup/checkout", h.user(h.topupCheckout))
	m.HandleFunc("GET /api/user/topup/payments", h.user(h.topupPayments))
	m.HandleFunc("GET /api/admin/payments", h.admin(h.adminPayments))
	m.HandleFunc("POST "+webhookPrefix+"{provider}/webhook", h.wrap(h.paymentWebhook))
	m.HandleFunc(webhookPrefix, h.wrap(h.noRoute))
}

var errNoPayments = &apiError{status: http.StatusNotFound, typ: errNotFound, code: "payments_off",
	msg: "this gateway takes no payments: ask the administrator for a redemption code, or to set up 'payments' in the Caddyfile"}

// topupItem is a price-list item as the console shows it.
type topupItem struct {
	ID string `json:"id"`
	// Price is what the customer pays, in the currency's major unit
	// ("10.00"); Amount the same in its smallest unit.
	Price    string `json:"price"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Units    int64  `json:"units"`
}

func (h *Handler) topupPrices(_ http.ResponseWriter, _ *http.Request, _ *caller) (any, error) {
	out := struct {
		Enabled  bool        `json:"enabled"`
		Provider string      `json:"provider,omitempty"`
		Prices   []topupItem `json:"prices"`
	}{Prices: []topupItem{}}
	if h.payments == nil {
		return out, nil
	}
	out.Enabled, out.Provider = true, h.payments.Name()
	for _, it := range h.payments.Items() {
		out.Prices = append(out.Prices, topupItem{ID: it.ID, Price: it.Price(), Amount: it.Amount, Currency: it.Currency, Units: it.Units})
	}
	return out, nil
}

func (h *Handler) topupCheckout(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.payments == nil {
		return nil, errNoPayments
	}
	var in struct {
		Price string `json:"price"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	// each checkout is a stored payment and a call to the provider
	if err := h.gate.Limit(h.clientNetwork(r), "checkout", c.user.ID); err != nil {
		return nil, err
	}
	co, err := h.payments.Checkout(r.Context(), c.user, in.Price)
	switch {
	case errors.Is(err, payments.ErrUnknownItem):
		return nil, badRequest("invalid_price", "%q is not on the price list: pick one of GET /api/user/topup/prices", in.Price)
	case errors.Is(err, payments.ErrProvider):
		// what the provider said is the operator's to read, in the log
		h.log.Error("checkout not started", zap.Int64("user_id", c.user.ID), zap.Error(err))
		return nil, &apiError{status: http.StatusBadGateway, typ: errAPI, code: "checkout_failed",
			msg: "the payment provider did not start the checkout; try again later, and tell the administrator if it persists"}
	case err != nil:
		return nil, err
	}
	return co, nil
}

func (h *Handler) topupPayments(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.payments == nil {
		return []*store.Payment{}, nil
	}
	list, err := h.payments.Payments(r.Context(), c.user.ID, 20)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*store.Payment{}
	}
	return list, nil
}

// adminPayments lists every user's payments (?user_id= one user's),
// newest first, at most ?limit= (100 by default, 1000 at most).
func (h *Handler) adminPayments(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	userID, err := queryID(r, "user_id", "a user's id")
	if err != nil {
		return nil, err
	}
	limit, err := queryID(r, "limit", "a number of payments")
	if err != nil {
		return nil, err
	}
	if h.payments == nil {
		return []*store.Payment{}, nil
	}
	list, err := h.payments.Payments(r.Context(), userID, int(min(limit, 1000)))
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*store.Payment{}
	}
	return list, nil
}

// paymentWebhook applies one delivery. A bad signature is a 400 and
// changes nothing; an event applied before is not applied again and is
// answered 200 (duplicate), so that the provider stops delivering it; a
// store that cannot write is a 500, which the provider delivers again.
func (h *Handler) paymentWebhook(_ http.ResponseWriter, r *http.Request) (any, error) {
	if h.payments == nil || r.PathValue("provider") != h.payments.Name() {
		return nil, errNoPayments
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		return nil, badRequest("invalid_body", "the body could not be read: %v", err)
	}
	if len(body) > maxWebhookBody {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: errInvalidRequest, code: "body_too_large",
			msg: "a webhook delivery is at most 1 MiB"}
	}
	res, err := h.payments.Webhook(r.Context(), r.Header, body)
	switch {
	case errors.Is(err, payments.ErrSignature):
		h.log.Warn("payment webhook refused: bad signature", zap.String("provider", h.payments.Name()), zap.Error(err))
		return nil, badRequest("invalid_signature", "the webhook's signature does not verify: check the endpoint's signing secret (webhook_secret)")
	case errors.Is(err, store.ErrPaymentMismatch):
		return nil, badRequest("payment_mismatch", "the event does not match the payment's checkout: see the gateway's log")
	case err != nil:
		return nil, err // the store: the provider delivers again later
	}
	return map[string]any{"received": true, "outcome": res.Outcome}, nil
}
