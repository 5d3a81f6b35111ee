package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
)

// A Realtime session is a WebSocket the gateway accepts from the client
// once the key, the model and the quota are checked, and a second one it
// opens to the channel's upstream with the channel's key. Two pumps copy
// messages, one per direction, each in order; close codes and reasons
// cross in both directions. The upstream's response.done events are read
// for their usage: each settles the response's reservation and is a usage
// row, and the next response is reserved at once. A user whose quota no
// longer covers a response gets an error event and the session ends with
// close code 1008.
//
// A session ends with 1001 when its configuration is unloaded (a reload,
// a shutdown), after the response under way is cancelled and billed.
//
// Bounds: one message is at most the channel's max_stream_event bytes
// (the peer that sends more is closed with 1009), and a session silent in
// both directions for the channel's stream_idle_timeout is closed (1001).

// Close codes the gateway uses itself.
const (
	closeQuota     = websocket.StatusPolicyViolation // 1008
	closeIdle      = websocket.StatusGoingAway       // 1001
	closeGoingAway = websocket.StatusGoingAway       // 1001
	closeUpstream  = websocket.StatusInternalError   // 1011
)

// closeWait bounds the close handshake with either peer.
const closeWait = 5 * time.Second

// serveRealtime relays one Realtime session.
func (h *Relay) serveRealtime(w http.ResponseWriter, r *http.Request, rt route, id *keys.Identity) error {
	a := h.app
	db := a.db
	db.enter()
	defer db.leave()
	model := r.URL.Query().Get("model")
	x := &exchange{w: w, r: r, dialect: rt.dialect, id: id, start: time.Now(), requestID: requestIDOf(r),
		req: &adapters.Request{Op: adapters.OpRealtime, Dialect: rt.dialect.Name(), Model: model, Stream: true}}
	s := &realtimeSession{h: h, first: x}
	defer s.finish()

	dialect, ok := rt.dialect.(adapters.RealtimeDialect)
	if !ok {
		return x.fail(adapters.NotFound("%s clients have no Realtime endpoint", rt.dialect.Name()))
	}
	h2 := r.ProtoMajor >= 2 && r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
	if !h2 && (r.Method != http.MethodGet || !headerHasToken(r.Header, "Upgrade", "websocket")) {
		w.Header().Set("Upgrade", "websocket")
		return x.fail(adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is a WebSocket endpoint: open it with a WebSocket client (GET with 'Upgrade: websocket', or HTTP/2's extended CONNECT)", r.URL.Path))
	}
	if model == "" {
		return x.fail(adapters.BadRequest("the Realtime model is required: open /v1/realtime?model=<model>, for example ?model=gpt-4o-realtime-preview"))
	}
	if e := checkModelName(model); e != nil {
		x.req.Model = ""
		return x.fail(e)
	}
	if a.channels.Has(model) && len(realtimeChannels(a, model)) == 0 {
		return x.fail(adapters.BadRequest("the model %s is served by channels whose family has no Realtime endpoint: use a Realtime model (GET /v1/models lists them)", model))
	}
	if e := h.admit(x); e != nil {
		return x.fail(e)
	}
	// the rate limits (max_parallel) are held for the whole session
	s.ticket, x.ticket = x.ticket, billing.Ticket{}
	up, ch, e := h.dialRealtime(x, model)
	if e != nil {
		return x.fail(e)
	}
	s.up, s.ch, s.prov = up, ch, a.providers[ch.Name].(adapters.RealtimeProvider)
	x.channel = ch.Name
	opts := &websocket.AcceptOptions{Subprotocols: dialect.RealtimeSubprotocols(), InsecureSkipVerify: true}
	var client *websocket.Conn
	var err error
	if h2 {
		client, err = acceptExtendedConnect(w, r, opts)
	} else {
		client, err = websocket.Accept(w, r, opts)
	}
	if err != nil {
		up.CloseNow()
		h.log.Warn("realtime upgrade failed", zap.Error(err))
		x.status, x.errMsg = http.StatusBadRequest, "the WebSocket upgrade failed"
		return nil
	}
	x.status = http.StatusOK
	x.ttfb = time.Since(x.start)
	s.client, s.dialect = client, dialect
	s.relay()
	return nil
}

// realtimeChannels are the model's channels whose family serves Realtime
// sessions, in the order they are tried.
func realtimeChannels(a *App, model string) []*routing.Channel {
	var out []*routing.Channel
	for _, ch := range a.channels.Plan(model, a.MaxAttempts) {
		if _, ok := a.providers[ch.Name].(adapters.RealtimeProvider); ok {
			out = append(out, ch)
		}
	}
	return out
}

// dialRealtime opens the upstream socket on the first channel that
// accepts it, failing over as the relay does.
func (h *Relay) dialRealtime(x *exchange, model string) (*websocket.Conn, *routing.Channel, *adapters.Error) {
	a := h.app
	var last *failure
	plan := realtimeChannels(a, model)
	for i, ch := range plan {
		if i > 0 && x.r.Context().Err() != nil {
			return nil, nil, adapters.ClientClosed()
		}
		prov := a.providers[ch.Name]
		b := a.bounds[ch.Name]
		u, hdr, err := prov.(adapters.RealtimeProvider).RealtimeDial(&adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(model)}, x.r)
		if err != nil {
			return nil, nil, asError(err)
		}
		ctx, cancel := context.WithTimeout(x.r.Context(), b.dial+b.responseHeader)
		// the channel's transport (its dial timeout, TLS, proxy), without a
		// client timeout, which would cut the socket
		conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
			HTTPClient: &http.Client{Transport: a.clients[ch.Name].Transport, CheckRedirect: noRedirects},
			HTTPHeader: hdr,
		})
		cancel()
		if err == nil {
			ch.Succeeded()
			conn.SetReadLimit(int64(b.maxStreamEvent))
			x.upstreamID = upstreamRequestID(prov, resp.Header)
			return conn, ch, nil
		}
		var f *failure
		switch {
		case x.r.Context().Err() != nil:
			return nil, nil, adapters.ClientClosed()
		case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			f = h.upstreamFailure(ch, prov.DecodeError(resp.StatusCode, body), resp.Header)
		default:
			f = &failure{channel: true, detail: maskKeys(err.Error(), ch.Keys), err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
				"the upstream channel %q could not open a Realtime session", ch.Name)}
		}
		if !f.channel {
			return nil, nil, f.err
		}
		last = f
		a.metrics.attemptFailed(ch.Name, f.err.Status, true)
		ch.Failed(a.health, time.Now(), f.retryAfter)
		a.logFailure(h.log, ch, f, failover(i+1 < len(plan)))
	}
	if last == nil {
		return nil, nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "no channel is available for model %q", model)
	}
	return nil, nil, last.err
}

// realtimeReservation is what one Realtime response holds while it runs:
// the model's max_output (default_max_tokens without one) of audio in and
// as much of audio out, the dearest tokens. A response that costs more is
// still charged in full; the reservation bounds how far below zero one
// response can take a balance.
func (h *Relay) realtimeReservation(price *billing.Price) int64 {
	n := price.MaxOutput
	if n <= 0 {
		n = h.app.DefaultMaxTokens
	}
	return price.Cost(adapters.Usage{PromptTokens: n, AudioPromptTokens: n, CompletionTokens: n, AudioCompletionTokens: n})
}

// realtimeSession is one relayed session and its billing: current is the
// exchange of the response under way, holding its reservation.
type realtimeSession struct {
	h       *Relay
	first   *exchange // the session's own exchange: its slot, its rate-limit ticket
	current *exchange
	client  *websocket.Conn
	up      *websocket.Conn
	ch      *routing.Channel
	prov    adapters.RealtimeProvider
	dialect adapters.RealtimeDialect
	ticket  billing.Ticket
	// responses is how many response.done were billed, tokens their tokens
	responses int
	tokens    int64
	last      atomic.Int64 // unix nanoseconds of the last message either way
	closing   sync.Once
	// inFlight: a response was created and is not done; clientGone: the
	// client cannot be written to; doneCh is told of each response.done
	mu         sync.Mutex // guards current, which both pumps mark
	inFlight   atomic.Bool
	clientGone atomic.Bool
	doneCh     chan struct{}
}

// relay runs the two pumps until the session ends.
func (s *realtimeSession) relay() {
	s.current = s.first
	s.doneCh = make(chan struct{}, 1)
	b := s.h.app.bounds[s.ch.Name]
	s.client.SetReadLimit(int64(b.maxStreamEvent))
	s.last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.pumpToUpstream() }()
	go func() { defer wg.Done(); s.pumpToClient() }()
	go func() { wg.Wait(); close(done) }()
	idle := time.NewTicker(max(b.streamIdle/4, 10*time.Millisecond))
	defer idle.Stop()
	for {
		select {
		case <-done:
			return
		case <-s.h.done:
			// as Caddy's reverse_proxy ends its WebSockets on a reload:
			// the client reconnects to the new configuration
			s.mark(http.StatusServiceUnavailable, "the gateway's configuration was unloaded")
			s.cancelResponse(context.Background())
			s.end(closeGoingAway, "the gateway is reloading or shutting down: reconnect", closeGoingAway, "")
			<-done
			return
		case <-idle.C:
			if time.Since(time.Unix(0, s.last.Load())) > b.streamIdle {
				s.mark(http.StatusGatewayTimeout, "the session was idle for "+b.streamIdle.String())
				s.end(closeIdle, "idle for "+b.streamIdle.String(), closeIdle, "idle")
				<-done
				return
			}
		}
	}
}

// end closes both sockets once, each with its own code and reason.
func (s *realtimeSession) end(clientCode websocket.StatusCode, clientReason string, upCode websocket.StatusCode, upReason string) {
	s.closing.Do(func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); closeConn(s.client, clientCode, clientReason) }()
		go func() { defer wg.Done(); closeConn(s.up, upCode, upReason) }()
		wg.Wait()
	})
}

// closeConn closes c with a code, or at once for one that cannot be sent
// (no status, an abnormal end).
func closeConn(c *websocket.Conn, code websocket.StatusCode, reason string) {
	switch code {
	case -1, websocket.StatusNoStatusRcvd, websocket.StatusAbnormalClosure, websocket.StatusTLSHandshake:
		c.CloseNow()
		return
	}
	done := make(chan struct{})
	go func() {
		if c.Close(code, reason) != nil {
			c.CloseNow()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		c.CloseNow()
	}
}

// closeOf is the code and reason a read ended with: the peer's close, or
// -1 when it sent none.
func closeOf(err error) (websocket.StatusCode, string) {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code, ce.Reason
	}
	return -1, ""
}

// pumpToUpstream copies the client's messages to the upstream, in order.
func (s *realtimeSession) pumpToUpstream() {
	ctx := context.Background()
	for {
		typ, msg, err := s.client.Read(ctx)
		if err != nil {
			code, reason := closeOf(err)
			if errors.Is(err, websocket.ErrMessageTooBig) {
				s.mark(http.StatusRequestEntityTooLarge, "the client sent a message larger than max_stream_event")
				code, reason = websocket.StatusMessageTooBig, "a client message was too large"
			}
			s.clientGone.Store(true)
			s.cancelResponse(ctx)
			s.end(code, reason, code, reason)
			return
		}
		s.last.Store(time.Now().UnixNano())
		if err := s.up.Write(ctx, typ, msg); err != nil {
			code, reason := closeOf(err)
			s.end(code, reason, -1, "")
			return
		}
	}
}

// pumpToClient copies the upstream's messages to the client, in order,
// billing each response.done after relaying it.
func (s *realtimeSession) pumpToClient() {
	ctx := context.Background()
	for {
		typ, msg, err := s.up.Read(ctx)
		if err != nil {
			code, reason := closeOf(err)
			if errors.Is(err, websocket.ErrMessageTooBig) {
				s.mark(http.StatusBadGateway, "the upstream sent a message larger than max_stream_event")
				code, reason = closeUpstream, "an upstream message was too large"
			} else if code == -1 {
				code, reason = closeUpstream, "the upstream connection broke"
				s.mark(http.StatusBadGateway, reason)
			}
			s.end(code, reason, code, reason)
			return
		}
		s.last.Store(time.Now().UnixNano())
		kind, usage := adapters.RealtimeOther, adapters.Usage{}
		if typ == websocket.MessageText {
			kind, usage = s.prov.RealtimeEvent(msg)
		}
		if kind == adapters.RealtimeResponseStarted {
			select { // a finished response's signal is not this one's
			case <-s.doneCh:
			default:
			}
			s.inFlight.Store(true)
		}
		if s.clientGone.Load() {
			// the client left mid-response: only its end is awaited
			if kind == adapters.RealtimeResponseDone {
				s.settleResponse(usage)
				s.responseDone()
			}
			continue
		}
		if err := s.client.Write(ctx, typ, msg); err != nil {
			// the client is gone: what the response uses is still owed,
			// and the other pump ends the session
			s.clientGone.Store(true)
			if kind == adapters.RealtimeResponseDone {
				s.settleResponse(usage)
				s.responseDone()
			}
			continue
		}
		if kind == adapters.RealtimeResponseDone {
			e := s.settleResponse(usage)
			s.responseDone()
			if e != nil {
				_ = s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(e))
				s.end(closeQuota, e.Code, websocket.StatusNormalClosure, "")
				return
			}
		}
	}
}

// mark records why the session ended on the exchange under way.
func (s *realtimeSession) mark(status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current.status, s.current.errMsg = status, msg
}

// responseDone marks the response under way as finished.
func (s *realtimeSession) responseDone() {
	s.inFlight.Store(false)
	select {
	case s.doneCh <- struct{}{}:
	default:
	}
}

// cancelResponse, when a session ends mid-response (the client left, the
// configuration was unloaded), asks the upstream to cancel the response
// and waits a while for its response.done, which says what the response
// used; otherwise what was generated would go unbilled.
func (s *realtimeSession) cancelResponse(ctx context.Context) {
	if !s.inFlight.Load() {
		return
	}
	if s.up.Write(ctx, websocket.MessageText, s.prov.RealtimeCancel()) != nil {
		return
	}
	select {
	case <-s.doneCh:
	case <-time.After(closeWait):
		s.h.log.Warn("a cancelled Realtime response reported no usage", zap.String("channel", s.ch.Name))
	}
}

// settleResponse bills a finished response and reserves the next one; it
// returns the error that ends the session when the user cannot afford
// another response.
func (s *realtimeSession) settleResponse(u adapters.Usage) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.h
	x := s.current
	x.usage, x.status = u, http.StatusOK
	if x != s.first && !x.slot {
		x.slot = h.app.db.writer.Admit(true) == nil
	}
	s.responses++
	s.tokens += u.PromptTokens + u.CompletionTokens
	h.settle(x)
	next := &exchange{w: x.w, r: x.r, dialect: x.dialect, id: x.id, start: time.Now(), requestID: x.requestID,
		req: x.req, price: x.price, channel: x.channel, upstreamID: x.upstreamID}
	s.current = next
	amount := h.realtimeReservation(x.price)
	hold, ok := h.app.db.ledger.Admit(x.id.User, x.id.Token, amount)
	if !ok {
		next.channel = "" // nothing more is relayed
		return &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrInsufficientQuota, Code: "insufficient_quota",
			Message: "your quota does not cover another Realtime response (each reserves up to " + formatUnits(amount) + "), so the gateway ended the session: top up your account and reconnect"}
	}
	next.hold = hold
	return nil
}

// finish settles what the session still holds: the reservation of a
// response that never finished is released (and the session's own row
// written, when no response was billed), and the rate limits are let go.
func (s *realtimeSession) finish() {
	s.ticket.Done(time.Now(), s.tokens)
	if s.responses == 0 {
		s.h.settle(s.first) // the session's row, a refusal's too
		return
	}
	s.h.app.db.ledger.Settle(s.current.hold, 0)
	// its rows are the responses'; why it ended goes to the log
	if x := s.current; x.status >= 400 {
		s.h.log.Warn("realtime session ended", zap.String("channel", s.ch.Name), zap.Int("responses", s.responses),
			zap.Int("status", x.status), zap.String("reason", x.errMsg))
	}
}

// headerHasToken reports whether a comma-separated header holds token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
