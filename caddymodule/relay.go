package caddymodule

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tokenizer"
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
	start   time.Time
	ttfb    time.Duration
	channel string
	usage   adapters.Usage
	status  int
	errMsg  string
	// text is the completion text seen, for counting when the upstream
	// reports no usage.
	text strings.Builder
}

func (h *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a := h.app
	rt := a.routeOf(r)
	id := identityFrom(r.Context())
	if id == nil {
		return writeError(w, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: "authentication_error",
			Message: "no API key was checked: put gateway_auth before gateway_relay in the Caddyfile"})
	}
	switch rt.op {
	case adapters.OpListModels, adapters.OpGetModel:
		return h.serveModels(w, r, rt, id)
	case adapters.OpChat, adapters.OpCompletion, adapters.OpEmbedding, adapters.OpCountTokens:
	case adapters.OpUnknown:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, "invalid_request_error",
			"unknown endpoint %s %s: see the gateway's README for the paths it serves", r.Method, r.URL.Path))
	default:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, "invalid_request_error",
			"%s %s is not served by this gateway yet", r.Method, r.URL.Path))
	}

	// every request past authentication gets a usage row, refused ones too
	x := &exchange{w: w, r: r, dialect: rt.dialect, id: id, start: time.Now(), req: &adapters.Request{Op: rt.op}}
	defer h.settle(x)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.MaxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return x.fail(adapters.Errorf(http.StatusRequestEntityTooLarge, "request_too_large",
				"the request body is larger than the gateway's limit of %d bytes", a.MaxRequestBody))
		}
		return x.fail(adapters.BadRequest("the request body could not be read: %v", err))
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
	for _, ch := range plan {
		prov := a.providers[ch.Name]
		resp, e := h.send(x, ch, prov)
		if e != nil {
			e = channelError(e, ch.Name)
			lastErr = e
			if retryable(e.Status) {
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
		lastErr = adapters.Errorf(http.StatusServiceUnavailable, "api_error", "no channel is available for model %q", req.Model)
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

// countLocally answers count_tokens with the offline tokenizer.
func (h *Relay) countLocally(x *exchange) error {
	enc, ok := x.dialect.(adapters.TokenCountEncoder)
	if !ok {
		return x.fail(adapters.Errorf(http.StatusNotFound, "invalid_request_error", "this dialect has no token counting endpoint"))
	}
	n := tokenizer.CountChat(x.req.Model, chatTexts(x.req.Chat))
	body := enc.EncodeTokenCount(n)
	x.status = http.StatusOK
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(http.StatusOK)
	_, err := x.w.Write(body)
	return err
}

// admit checks the model against the token and the configuration and
// reserves its worst-case cost.
func (h *Relay) admit(x *exchange) *adapters.Error {
	a, req := h.app, x.req
	if len(x.id.Token.Models) > 0 && !slices.Contains(x.id.Token.Models, req.Model) {
		return &adapters.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "model_not_allowed",
			Message: "this API key may not use model " + req.Model + "; it may use: " + strings.Join(x.id.Token.Models, ", ")}
	}
	if !a.channels.Has(req.Model) {
		return &adapters.Error{Status: http.StatusNotFound, Type: "not_found_error", Code: "model_not_found",
			Message: "the model " + req.Model + " does not exist on this gateway: GET /v1/models lists the models your key may use"}
	}
	price, ok := a.prices[req.Model]
	if !ok {
		return &adapters.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "model_price_missing",
			Message: "the model " + req.Model + " has no price configured, so it cannot be billed: the operator must add 'price " + req.Model + " { ... }' (or mark it free) in the gateway's Caddyfile"}
	}
	x.price = price
	if req.Op == adapters.OpCountTokens {
		return nil
	}
	// the reservation estimates the prompt from its size (about four bytes
	// a token) rather than tokenizing it, to keep admission cheap
	completion := int64(0)
	if req.Op == adapters.OpChat || req.Op == adapters.OpCompletion {
		completion = a.DefaultMaxTokens
		if req.Chat != nil && req.Chat.MaxTokens != nil && *req.Chat.MaxTokens > 0 {
			completion = *req.Chat.MaxTokens
		}
	}
	amount := price.Reservation(int64(len(req.Raw)/4), completion)
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

func formatUnits(u int64) string {
	return fmt.Sprintf("%d.%06d USD", u/billing.UnitsPerUSD, u%billing.UnitsPerUSD)
}

// retryable statuses send the request to the next channel: the upstream is
// down, overloaded or rate limited (or refused the channel itself, which
// channelError made a 502), and another channel may not be.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// channelError rewrites an upstream refusal of the channel itself: the
// client's key was fine, so it must not see a 401, nor the upstream's
// message, which can quote part of the channel's key.
func channelError(e *adapters.Error, channel string) *adapters.Error {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return adapters.Errorf(http.StatusBadGateway, "api_error",
			"the upstream refused channel %q's credentials (HTTP %d): the gateway's operator must fix its key", channel, e.Status)
	case http.StatusNotFound:
		return adapters.Errorf(http.StatusBadGateway, "api_error",
			"the upstream of channel %q does not know this model or endpoint (HTTP 404): the gateway's operator must fix its model list", channel)
	}
	return e
}

// send makes one attempt on one channel. It returns the upstream response
// when its status is 2xx, and otherwise an error in neutral form.
func (h *Relay) send(x *exchange, ch *routing.Channel, prov adapters.Provider) (*http.Response, *adapters.Error) {
	up := &adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(x.req.Model), Version: ch.Version}
	hr, err := prov.NewRequest(x.r.Context(), up, x.req)
	if err != nil {
		return nil, asError(err)
	}
	resp, err := h.app.clients[ch.Name].Do(hr)
	if err != nil {
		if x.r.Context().Err() != nil {
			return nil, &adapters.Error{Status: 499, Type: "api_error", Message: "the client closed the request"}
		}
		h.log.Warn("upstream request failed", zap.String("channel", ch.Name), zap.Error(err))
		return nil, adapters.Errorf(http.StatusBadGateway, "api_error", "the upstream channel %q could not be reached", ch.Name)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		e := prov.DecodeError(resp.StatusCode, b)
		return nil, e
	}
	return resp, nil
}

// relayBody answers a non-streamed request.
func (h *Relay) relayBody(x *exchange, prov adapters.Provider, resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	x.ttfb = time.Since(x.start)
	if err != nil {
		return x.fail(adapters.Errorf(http.StatusBadGateway, "api_error", "the upstream answer broke off: %v", err))
	}
	out, err := prov.DecodeResponse(x.req, body)
	if err != nil {
		return x.fail(adapters.Errorf(http.StatusBadGateway, "api_error", "the upstream answer could not be read: %v", err))
	}
	x.usage = out.Usage
	if !x.usage.Known() {
		for _, p := range out.Message.Parts {
			x.text.WriteString(p.Text)
		}
	}
	encoded, err := x.dialect.EncodeResponse(x.req, out)
	if err != nil {
		return x.fail(asError(err))
	}
	ct := out.ContentType
	if ct == "" {
		ct = "application/json"
	}
	x.w.Header().Set("Content-Type", ct)
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	_, err = x.w.Write(encoded)
	return err
}

// relayStream relays a stream event by event, flushing each as it comes.
// Once the first byte is out, an upstream failure ends the stream with an
// error event in the caller's dialect: never a clean end, which SDKs would
// take for a finished answer.
func (h *Relay) relayStream(x *exchange, prov adapters.Provider, resp *http.Response) error {
	defer resp.Body.Close()
	enc := x.dialect.NewStreamEncoder(x.req)
	dec := prov.NewStreamDecoder(x.req, resp.Body)
	rc := http.NewResponseController(x.w)
	hdr := x.w.Header()
	hdr.Set("Content-Type", enc.ContentType())
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	pending, _ := dec.(adapters.Pending)
	unflushed := false
	buf := make([]byte, 0, 512)
	for {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				buf = enc.Finish(buf[:0])
				if _, werr := x.w.Write(buf); werr == nil {
					_ = rc.Flush()
				}
				break
			}
			if x.r.Context().Err() != nil {
				x.status, x.errMsg = 499, "client disconnected"
				break
			}
			e := asError(err)
			if e.Status == 0 || e.Status < 400 {
				e.Status = http.StatusBadGateway
			}
			if _, ok := err.(*adapters.Error); !ok {
				e = adapters.Errorf(http.StatusBadGateway, "api_error", "the upstream stream broke off before its end: %v", err)
			}
			x.status, x.errMsg = e.Status, e.Message
			buf = enc.Error(buf[:0], e)
			if _, werr := x.w.Write(buf); werr == nil {
				_ = rc.Flush()
			}
			break
		}
		if x.ttfb == 0 {
			x.ttfb = time.Since(x.start)
		}
		x.observe(ev)
		buf = enc.Encode(buf[:0], ev)
		if len(buf) > 0 {
			if _, err := x.w.Write(buf); err != nil {
				x.status, x.errMsg = 499, "client disconnected"
				break
			}
			unflushed = true
		}
		if !unflushed || (pending != nil && pending.Pending()) {
			continue // the next event is already here: one flush for both
		}
		if err := rc.Flush(); err != nil {
			x.status, x.errMsg = 499, "client disconnected"
			break
		}
		unflushed = false
	}
	if !x.usage.Known() {
		if pt, ok := dec.(adapters.PartialText); ok {
			x.text.WriteString(pt.PartialText())
		}
	}
	if r, ok := dec.(adapters.Releaser); ok {
		r.Release()
	}
	return nil
}

// observe keeps what billing needs from an event: the last usage the
// upstream reported, and the text in case it reports none.
func (x *exchange) observe(ev *adapters.StreamEvent) {
	switch ev.Type {
	case adapters.EventUsage:
		if ev.Usage != nil {
			x.usage = *ev.Usage
		}
	case adapters.EventTextDelta, adapters.EventThinkingDelta:
		x.text.WriteString(ev.Text)
	case adapters.EventToolCallStart, adapters.EventToolCallDelta:
		if ev.ToolCall != nil {
			x.text.WriteString(ev.ToolCall.Name)
			x.text.WriteString(ev.ToolCall.Arguments)
		}
	}
}

// fail answers with an error before anything was relayed.
func (x *exchange) fail(e *adapters.Error) error {
	x.status, x.errMsg = e.Status, e.Message
	if e.Status == 499 {
		return nil // nobody is listening
	}
	return writeError(x.w, x.dialect, e)
}

// settle charges what the request used, by the upstream's counts or, when
// it reported none, by the local tokenizer, and queues its usage row.
func (h *Relay) settle(x *exchange) {
	req := x.req
	u := x.usage
	if !u.Known() && x.channel != "" && req.Op != adapters.OpCountTokens {
		u = estimateUsage(req, x.text.String())
	}
	cost := int64(0)
	// counting tokens is free, whoever counts
	if x.price != nil && x.channel != "" && req.Op != adapters.OpCountTokens {
		cost = x.price.Cost(u)
	}
	h.app.db.ledger.Settle(x.hold, cost)
	row := &store.UsageLog{
		CreatedAt:        x.start,
		UserID:           x.id.User.ID,
		TokenID:          x.id.Token.ID,
		Model:            req.Model,
		Channel:          x.channel,
		Endpoint:         x.r.URL.Path,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		CachedTokens:     u.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
		Cost:             cost,
		Status:           x.status,
		Estimated:        u.Estimated,
		Stream:           req.Stream,
		LatencyMS:        time.Since(x.start).Milliseconds(),
		TTFBMS:           x.ttfb.Milliseconds(),
		Error:            x.errMsg,
	}
	h.app.db.writer.Write(row)
}

// estimateUsage counts tokens locally for an upstream that reported none.
func estimateUsage(req *adapters.Request, completion string) adapters.Usage {
	u := adapters.Usage{Estimated: true}
	switch {
	case req.Chat != nil:
		u.PromptTokens = tokenizer.CountChat(req.Model, chatTexts(req.Chat))
	case req.Completion != nil:
		for _, p := range req.Completion.Prompt {
			u.PromptTokens += tokenizer.Count(req.Model, p)
		}
	case req.Embedding != nil:
		for _, in := range req.Embedding.Input {
			u.PromptTokens += tokenizer.Count(req.Model, in)
		}
	}
	u.CompletionTokens = tokenizer.Count(req.Model, completion)
	return u
}

// chatTexts lists the text of each message, system first, for counting.
func chatTexts(c *adapters.ChatRequest) []string {
	if c == nil {
		return nil
	}
	var out []string
	var sys strings.Builder
	for _, p := range c.System {
		sys.WriteString(p.Text)
	}
	if sys.Len() > 0 {
		out = append(out, sys.String())
	}
	for _, m := range c.Messages {
		var b strings.Builder
		for _, p := range m.Parts {
			b.WriteString(p.Text)
			if p.ToolCall != nil {
				b.WriteString(p.ToolCall.Name)
				b.WriteString(p.ToolCall.Arguments)
			}
			if p.ToolResult != nil {
				for _, rp := range p.ToolResult.Content {
					b.WriteString(rp.Text)
				}
			}
		}
		out = append(out, b.String())
	}
	for _, t := range c.Tools {
		out = append(out, t.Name+t.Description+string(t.Parameters))
	}
	return out
}

// asError turns any error into a neutral one.
func asError(err error) *adapters.Error {
	var e *adapters.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return &adapters.Error{Status: 499, Type: "api_error", Message: "the client closed the request"}
	}
	return adapters.Errorf(http.StatusBadGateway, "api_error", "%v", err)
}

// serveModels lists the models this key may use, in the caller's dialect.
func (h *Relay) serveModels(w http.ResponseWriter, r *http.Request, rt route, id *keys.Identity) error {
	var list []adapters.ModelInfo
	for _, m := range h.app.channels.Models() {
		if len(id.Token.Models) > 0 && !slices.Contains(id.Token.Models, m) {
			continue
		}
		list = append(list, adapters.ModelInfo{ID: m, OwnedBy: h.app.channels.Owner(m), Created: 1700000000})
	}
	w.Header().Set("Content-Type", "application/json")
	if rt.op == adapters.OpGetModel {
		want := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		want = strings.TrimPrefix(strings.SplitN(want, ":", 2)[0], "models/")
		for _, m := range list {
			if m.ID == want {
				if me, ok := rt.dialect.(adapters.ModelEncoder); ok {
					_, err := w.Write(me.EncodeModel(m))
					return err
				}
			}
		}
		return writeError(w, rt.dialect, &adapters.Error{Status: http.StatusNotFound, Type: "not_found_error", Code: "model_not_found",
			Message: "the model " + want + " does not exist on this gateway or your key may not use it"})
	}
	_, err := w.Write(rt.dialect.EncodeModels(list))
	return err
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Relay)(nil)
	_ caddy.Provisioner           = (*Relay)(nil)
)
