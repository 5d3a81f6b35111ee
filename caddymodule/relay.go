package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
)

func init() {
	caddy.RegisterModule(Relay{})
}

// Relay serves every model endpoint: it decodes the caller's request,
// resolves the model to channels, reserves quota, sends the request through
// the channel's adapter, relays the answer (streams event by event), meters
// it and settles the charge. It must run after gateway_auth.
type Relay struct {
	app *App
	log *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Relay) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_relay",
		New: func() caddy.Module { return new(Relay) },
	}
}

// Provision finds the gateway app.
func (h *Relay) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	return nil
}

// exchange is one request's life, from decode to settlement.
type exchange struct {
	w       http.ResponseWriter
	r       *http.Request
	dialect adapters.Dialect
	id      *keys.Identity
	req     *adapters.Request
	price   *billing.Price
	hold    billing.Hold
	ticket  billing.Ticket // rate limits held
	slot    bool           // a usage queue slot is taken for the row
	start   time.Time
	ttfb    time.Duration
	channel string
	usage   adapters.Usage
	status  int
	errMsg  string
	// requestID is the gateway's id for the request, upstreamID the
	// upstream's own for its last attempt
	requestID, upstreamID string
	// text is the completion text seen, for counting when the upstream
	// reports no usage.
	text strings.Builder
	// tail is the text relayed after the last usage the upstream reported
	// (passthrough streams), and cut is true for a stream that ended
	// before its end event: see billedUsage.
	tail string
	cut  bool
}

func (h *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a := h.app
	rt := a.routeOf(r)
	id := identityFrom(r.Context())
	if id == nil {
		return writeError(w, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication,
			Message: "no API key was checked: put gateway_auth before gateway_relay in the Caddyfile"})
	}
	switch rt.op {
	case adapters.OpListModels, adapters.OpGetModel:
		return h.serveModels(w, r, rt, id)
	case adapters.OpChat, adapters.OpCompletion, adapters.OpEmbedding, adapters.OpCountTokens, adapters.OpResponses:
	case adapters.OpUpgrade:
		// answered at once, so a client that tries a socket first falls
		// back to plain HTTP instead of retrying
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is served over HTTP only, not as a WebSocket: POST to it instead", r.URL.Path))
	case adapters.OpUnknown:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"unknown endpoint %s %s: see the gateway's README for the paths it serves", r.Method, r.URL.Path))
	default:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"%s %s is not served by this gateway yet", r.Method, r.URL.Path))
	}

	// the database stays open until this request's row is queued
	db := a.db
	db.enter()
	defer db.leave()
	// every request past authentication gets a usage row, refused ones too
	x := &exchange{w: w, r: r, dialect: rt.dialect, id: id, start: time.Now(), req: &adapters.Request{Op: rt.op}, requestID: requestIDOf(r)}
	defer h.settle(x)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.MaxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return x.fail(adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
				"the request body is larger than the gateway's limit of %d bytes", a.MaxRequestBody))
		}
		return x.fail(adapters.BadRequest("the request body could not be read: %v", err))
	}
	// an unknown model is a 404 whatever else is wrong with the body
	if p, ok := rt.dialect.(adapters.ModelPeeker); ok {
		if m := p.PeekModel(rt.op, body, r); m != "" && !a.channels.Has(m) {
			x.req.Model = m
			return x.fail(unknownModel(m))
		}
	}
	req, err := rt.dialect.DecodeRequest(rt.op, body, r)
	if err != nil {
		return x.fail(asError(err))
	}
	x.req = req
	if e := h.admit(x); e != nil {
		return x.fail(e)
	}

	plan := a.channels.Plan(req.Model, a.MaxAttempts)
	if req.Op == adapters.OpCountTokens {
		// a vendor counts only its own dialect; across families count here
		plan = sameDialect(plan, a.providers, req.Dialect)
		if len(plan) == 0 {
			return h.countLocally(x)
		}
	}
	var lastErr *adapters.Error
	for i, ch := range plan {
		prov := a.providers[ch.Name]
		resp, e := h.send(x, ch, prov)
		if e != nil {
			e = channelError(e, ch.Name)
			lastErr = e
			if retryable(e.Status) {
				a.metrics.attemptFailed(ch.Name, e.Status, i+1 < len(plan))
				h.log.Warn("channel failed; trying the next", zap.String("channel", ch.Name), zap.Int("status", e.Status), zap.String("error", e.Message))
				continue
			}
			return x.fail(e)
		}
		x.channel = ch.Name
		if req.Stream {
			return h.relayStream(x, prov, resp)
		}
		return h.relayBody(x, prov, resp)
	}
	if lastErr == nil {
		lastErr = adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "no channel is available for model %q", req.Model)
	} else if lastErr.Status < 500 && lastErr.Status != http.StatusTooManyRequests {
		lastErr.Status = http.StatusBadGateway
	}
	return x.fail(lastErr)
}

// sameDialect keeps the channels whose upstream speaks the dialect.
func sameDialect(plan []*routing.Channel, providers map[string]adapters.Provider, dialect string) []*routing.Channel {
	out := plan[:0:0]
	for _, ch := range plan {
		if providers[ch.Name].WireDialect() == dialect {
			out = append(out, ch)
		}
	}
	return out
}

// admit checks the model against the token and the configuration and
// reserves its worst-case cost.
func (h *Relay) admit(x *exchange) *adapters.Error {
	a, req := h.app, x.req
	if len(x.id.Token.Models) > 0 && !slices.Contains(x.id.Token.Models, req.Model) {
		return &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_allowed",
			Message: "this API key may not use model " + req.Model + "; it may use: " + strings.Join(x.id.Token.Models, ", ")}
	}
	if !a.channels.Has(req.Model) {
		return unknownModel(req.Model)
	}
	price, ok := a.prices[req.Model]
	if !ok {
		return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "model_price_missing",
			Message: "the model " + req.Model + " has no price configured, so it cannot be billed: the operator must add 'price " + req.Model + " { ... }' (or mark it free) in the gateway's Caddyfile"}
	}
	x.price = price
	if e := h.admitLimits(x); e != nil {
		return e
	}
	if req.Op == adapters.OpCountTokens {
		return nil
	}
	amount, e := h.reservation(x)
	if e != nil {
		return e
	}
	if e := h.admitUsage(x, amount > 0); e != nil {
		return e
	}
	hold, ok := a.db.ledger.Admit(x.id.User, x.id.Token, amount)
	if !ok {
		if avail, _ := a.db.ledger.Available(x.id.User.ID); avail <= 0 {
			return quotaError("your quota is used up: top up your account and try again")
		}
		return quotaError("your remaining quota does not cover this request (it may cost up to " + formatUnits(amount) +
			"): top up your account, lower max_tokens, or ask for a key with a higher limit")
	}
	x.hold = hold
	return nil
}

// unknownModel is the 404 for a model no channel serves.
func unknownModel(model string) *adapters.Error {
	return &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
		Message: "the model " + model + " does not exist on this gateway: GET /v1/models lists the models your key may use"}
}

// send makes one attempt on one channel. It returns the upstream response
// when its status is 2xx, and otherwise an error in neutral form.
func (h *Relay) send(x *exchange, ch *routing.Channel, prov adapters.Provider) (*http.Response, *adapters.Error) {
	if e := h.app.allowed[ch.Name].check(ch.Name, prov, x.req); e != nil {
		return nil, e
	}
	up := &adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(x.req.Model)}
	hr, err := prov.NewRequest(x.r.Context(), up, x.req)
	if err != nil {
		return nil, asError(err)
	}
	resp, err := h.app.clients[ch.Name].Do(hr)
	if err == nil {
		x.upstreamID = upstreamRequestID(resp.Header)
	}
	if err != nil {
		if x.r.Context().Err() != nil {
			// the upstream may have started on it: its prompt is billed
			x.channel = ch.Name
			return nil, adapters.ClientClosed()
		}
		h.log.Warn("upstream request failed", zap.String("channel", ch.Name), zap.Error(err))
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream channel %q could not be reached", ch.Name)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		e := prov.DecodeError(resp.StatusCode, b)
		return nil, e
	}
	return resp, nil
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Relay)(nil)
	_ caddy.Provisioner           = (*Relay)(nil)
)
