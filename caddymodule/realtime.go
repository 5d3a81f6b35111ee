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
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
)

// A Realtime session is a WebSocket the gateway accepts from the client
// once the key, the model and the quota are checked, and a second one it
// opens to the channel's upstream with the channel's key. Two pumps copy
// messages, one per direction, each in order; close codes and reasons
// cross in both directions.
//
// Every cost a session can cause is reserved before it is relayed. Each
// response holds a reservation of its own while it runs (several may run
// at once: out-of-band responses, or one the upstream's turn detection
// starts): the session always holds one for the next response, a client's
// response.create beyond that reserves before it is relayed (or is
// refused with an error event), and the adapter caps every response's
// output at what was reserved, the session's default included (Setup).
// Each response.done settles its response's reservation and is a usage
// row. Input audio the upstream transcribes is reserved a block of
// transcriptionBlock at a time, before the audio is relayed, and billed
// per second at the model's audio_second; a model without that price
// cannot turn transcription on. A user whose quota no longer covers the
// next response, or the next block of audio, gets an error event and the
// session ends with close code 1008.
//
// A session ends with 1001 when its configuration is unloaded (a reload,
// a shutdown), after the responses under way are cancelled and billed.
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

// transcriptionBlock is how much transcribed audio one reservation covers:
// a usage row a minute of speech, not one per audio frame.
const transcriptionBlock = 60_000 // milliseconds

// serveRealtime relays one Realtime session.
func (h *Relay) serveRealtime(w http.ResponseWriter, r *http.Request, rt route, id *keys.Identity) error {
	a := h.app
	db := a.db
	db.enter()
	defer db.leave()
	model := r.URL.Query().Get("model")
	x := &engine.Exchange{W: w, R: r, Dialect: rt.dialect, ID: id, Start: time.Now(), RequestID: requestIDOf(r),
		Req: &adapters.Request{Op: adapters.OpRealtime, Dialect: rt.dialect.Name(), Model: model, Stream: true}}
	s := &realtimeSession{h: h, first: x}
	defer s.finish()

	dialect, ok := rt.dialect.(adapters.RealtimeDialect)
	if !ok {
		return x.Fail(adapters.NotFound("%s clients have no Realtime endpoint", rt.dialect.Name()))
	}
	h2 := r.ProtoMajor >= 2 && r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
	if !h2 && (r.Method != http.MethodGet || !headerHasToken(r.Header, "Upgrade", "websocket")) {
		w.Header().Set("Upgrade", "websocket")
		return x.Fail(adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is a WebSocket endpoint: open it with a WebSocket client (GET with 'Upgrade: websocket', or HTTP/2's extended CONNECT)", r.URL.Path))
	}
	if model == "" {
		return x.Fail(adapters.BadRequest("the Realtime model is required: open /v1/realtime?model=<model>, for example ?model=gpt-4o-realtime-preview"))
	}
	if e := checkModelName(model); e != nil {
		x.Req.Model = ""
		return x.Fail(e)
	}
	if a.channels.Has(model) && len(h.realtimePlan(model)) == 0 {
		return x.Fail(adapters.BadRequest("the model %s is served by channels whose family has no Realtime endpoint: use a Realtime model (GET /v1/models lists them)", model))
	}
	if e := h.engine.Admit(x); e != nil {
		return x.Fail(e)
	}
	// the rate limits (max_parallel) are held for the whole session
	s.ticket, x.Ticket = x.Ticket, billing.Ticket{}
	up, ch, e := h.dialRealtime(x, model)
	if e != nil {
		return x.Fail(e)
	}
	s.up, s.ch = up, ch
	x.Channel = ch.Name
	s.sess = a.providers[ch.Name].(adapters.RealtimeProvider).RealtimeSession(r, adapters.RealtimeLimits{
		MaxOutputTokens: h.engine.RealtimeOutput(x.Price),
		Transcription:   x.Price.Free || x.Price.AudioSecond > 0,
	})
	if setup := s.sess.Setup(); setup != nil {
		// before any client event, so that the upstream applies it first
		if err := up.Write(r.Context(), websocket.MessageText, setup); err != nil {
			up.CloseNow()
			return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream channel %q could not open a Realtime session", ch.Name))
		}
	}
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
		x.Status, x.ErrMsg = http.StatusBadRequest, "the WebSocket upgrade failed"
		return nil
	}
	x.Status = http.StatusOK
	x.TTFB = time.Since(x.Start)
	s.client, s.dialect = client, dialect
	s.relay()
	return nil
}

// realtimePlan is the model's channels whose family serves Realtime
// sessions, in the order they are tried.
func (h *Relay) realtimePlan(model string) []*routing.Channel {
	return h.engine.Plan(model, func(ch *routing.Channel) bool {
		_, ok := h.app.providers[ch.Name].(adapters.RealtimeProvider)
		return ok
	})
}

// dialRealtime opens the upstream socket on the first of the Realtime
// plan's channels that accepts it.
func (h *Relay) dialRealtime(x *engine.Exchange, model string) (*websocket.Conn, *routing.Channel, *adapters.Error) {
	plan := h.realtimePlan(model)
	var conn *websocket.Conn
	ch, f := h.engine.Run(x.R.Context(), model, plan, engine.AttemptFunc(func(ch *routing.Channel) *engine.Failure {
		var f *engine.Failure
		conn, f = h.dialChannel(x, ch, model)
		return f
	}))
	if f != nil {
		return nil, nil, f.Err
	}
	return conn, ch, nil
}

// dialChannel is one Realtime connect attempt.
func (h *Relay) dialChannel(x *engine.Exchange, ch *routing.Channel, model string) (*websocket.Conn, *engine.Failure) {
	a := h.app
	prov := a.providers[ch.Name]
	b := a.bounds[ch.Name]
	u, hdr, err := prov.(adapters.RealtimeProvider).RealtimeDial(&adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(model)}, x.R)
	if err != nil {
		return nil, &engine.Failure{Err: asError(err)}
	}
	ctx, cancel := context.WithTimeout(x.R.Context(), b.dial+b.responseHeader)
	// the channel's transport (its dial timeout, TLS, proxy), without a
	// client timeout, which would cut the socket
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: a.clients[ch.Name].Transport, CheckRedirect: noRedirects},
		HTTPHeader: hdr,
	})
	cancel()
	switch {
	case err == nil:
		conn.SetReadLimit(int64(b.maxStreamEvent))
		x.UpstreamID = upstreamRequestID(prov, resp.Header)
		return conn, nil
	case x.R.Context().Err() != nil:
		return nil, engine.ClientClosed()
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, h.engine.UpstreamFailure(ch, prov.DecodeError(resp.StatusCode, body), resp.Header)
	}
	return nil, &engine.Failure{Channel: true, Detail: engine.MaskKeys(err.Error(), ch.Keys), Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
		"the upstream channel %q could not open a Realtime session", ch.Name)}
}

// realtimeSession is one relayed session and its billing.
type realtimeSession struct {
	h      *Relay
	first  *engine.Exchange // the session's own exchange: its slot, its rate-limit ticket
	client *websocket.Conn
	up     *websocket.Conn
	ch     *routing.Channel
	sess   adapters.RealtimeSession
	// dialect is the client's, for error events
	dialect adapters.RealtimeDialect
	ticket  billing.Ticket
	last    atomic.Int64 // unix nanoseconds of the last message either way
	closing sync.Once
	// clientGone: the client cannot be written to
	clientGone atomic.Bool

	mu sync.Mutex // guards what follows, which both pumps change
	// pending are reservations for responses not yet started: one for the
	// next, and one more for each relayed response.create beyond it;
	// asked counts the response.create relayed and not yet started
	pending []billing.Hold
	asked   int
	// active are the responses under way, by id; doneCh is told when one
	// ends
	active map[string]*engine.Exchange
	doneCh chan struct{}
	// transcribing is the block of transcribed audio under way: its
	// reservation covers txCap milliseconds, txMillis are used
	transcribing     *engine.Exchange
	txMillis, txCap  int64
	rows             int  // usage rows written
	firstSlotClaimed bool // a row took the session's usage slot
	status           int  // why the session ended, when it failed
	errMsg           string
}

// relay runs the two pumps until the session ends.
func (s *realtimeSession) relay() {
	// the admission's reservation is the first response's
	s.pending = []billing.Hold{s.first.Hold}
	s.first.Hold = billing.Hold{}
	s.active = map[string]*engine.Exchange{}
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
			s.cancelResponses(context.Background())
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

// pumpToUpstream copies the client's messages to the upstream, in order,
// each once what it may cost is reserved and it is within the limits.
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
			s.cancelResponses(ctx)
			s.end(code, reason, code, reason)
			return
		}
		s.last.Store(time.Now().UnixNano())
		if typ == websocket.MessageText {
			out, ev, e := s.sess.ClientEvent(msg)
			if e == nil && ev.CreatesResponse {
				e = s.askResponse()
			}
			if e != nil {
				// refused: the event is not relayed, the session goes on
				if s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(e)) != nil {
					s.clientGone.Store(true)
				}
				continue
			}
			if ev.TranscribedMillis > 0 {
				if e := s.transcribe(ev.TranscribedMillis); e != nil {
					s.mark(e.Status, e.Message)
					_ = s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(e))
					s.cancelResponses(ctx)
					s.end(closeQuota, e.Code, websocket.StatusNormalClosure, "")
					return
				}
			}
			msg = out
		}
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
	var ending *adapters.Error // the quota ran out: the session ends once no response is under way
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
		var ev adapters.RealtimeServerEvent
		if typ == websocket.MessageText {
			ev = s.sess.ServerEvent(msg)
		}
		switch ev.Kind {
		case adapters.RealtimeSetupDone:
			continue // the answer to the gateway's own event
		case adapters.RealtimeSetupFailed:
			// without its limits a response could cost more than it reserved
			s.h.log.Warn("the upstream refused the Realtime session's limits", zap.String("channel", s.ch.Name), zap.String("error", ev.Message))
			s.mark(http.StatusBadGateway, "the upstream refused the session's output limit")
			_ = s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
				"the upstream refused the gateway's limits for this session, so the gateway ended it")))
			s.end(closeUpstream, "the upstream refused the session's limits", websocket.StatusNormalClosure, "")
			return
		case adapters.RealtimeResponseStarted:
			if !s.started(ev.ResponseID) {
				// nothing covers it: cancelled at once, billed on its end
				_ = s.up.Write(ctx, websocket.MessageText, s.sess.Cancel(ev.ResponseID))
			}
		}
		if !s.clientGone.Load() {
			if err := s.client.Write(ctx, typ, msg); err != nil {
				// the client is gone: what the responses use is still
				// owed, and the other pump ends the session
				s.clientGone.Store(true)
			}
		}
		if ev.Kind != adapters.RealtimeResponseDone {
			continue
		}
		if e := s.settleResponse(ev.ResponseID, ev.Usage); e != nil && ending == nil && !s.clientGone.Load() {
			// the responses still under way are cancelled and billed
			// (their ends are read here) before the session ends
			ending = e
			_ = s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(e))
			for _, id := range s.activeIDs() {
				_ = s.up.Write(ctx, websocket.MessageText, s.sess.Cancel(id))
			}
		}
		if ending != nil && len(s.activeIDs()) == 0 {
			s.mark(ending.Status, ending.Message)
			s.end(closeQuota, ending.Code, websocket.StatusNormalClosure, "")
			return
		}
	}
}

// activeIDs are the responses under way.
func (s *realtimeSession) activeIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.active))
	for id := range s.active {
		ids = append(ids, id)
	}
	return ids
}

// mark records why the session ended.
func (s *realtimeSession) mark(status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.errMsg = status, msg
}

// reserveResponse reserves one response's worth.
func (s *realtimeSession) reserveResponse() (billing.Hold, int64, bool) {
	x := s.first
	amount := s.h.engine.RealtimeReservation(x.Price)
	ad, err := s.h.app.gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount)})
	return ad.Hold, amount, err == nil
}

// askResponse reserves for a client's response.create before it is
// relayed, unless a reservation is already waiting for it.
func (s *realtimeSession) askResponse() *adapters.Error {
	// a response.create is a request: it counts toward the key's rpm and
	// waits for its tpm, as any other would (the session holds max_parallel)
	x, now := s.first, time.Now()
	ad, err := s.h.app.gate.Admit(now, billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateInSession})
	if err != nil {
		return engine.AdmissionError(err, nil, "")
	}
	ad.Ticket.Done(now, 0) // its tokens count when it ends, on the session's ticket
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) <= s.asked {
		hold, amount, ok := s.reserveResponse()
		if !ok {
			return quotaError("your quota does not cover another Realtime response alongside those under way (each reserves up to " +
				formatUnits(amount) + "), so the gateway did not relay this response.create: wait for a response to finish, or top up your account")
		}
		s.pending = append(s.pending, hold)
	}
	s.asked++
	return nil
}

// started gives a response that began upstream a waiting reservation, and
// reserves the next response's; false when nothing covers it.
func (s *realtimeSession) started(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.newRow()
	s.active[id] = x
	s.asked = max(s.asked-1, 0)
	covered := len(s.pending) > 0
	if covered {
		x.Hold, s.pending = s.pending[0], s.pending[1:]
	} else if hold, _, ok := s.reserveResponse(); ok {
		x.Hold, covered = hold, true
	}
	if len(s.pending) == 0 {
		// a response the upstream starts by itself finds this one; if the
		// quota does not cover it now, the next response.done says so
		if hold, _, ok := s.reserveResponse(); ok {
			s.pending = append(s.pending, hold)
		}
	}
	return covered
}

// newRow is the exchange of one usage row of the session; its hold names
// the user and token, so a cost settles on them even unreserved.
func (s *realtimeSession) newRow() *engine.Exchange {
	f := s.first
	return &engine.Exchange{W: f.W, R: f.R, Dialect: f.Dialect, ID: f.ID, Start: time.Now(), RequestID: f.RequestID,
		Req: f.Req, Price: f.Price, Channel: f.Channel, UpstreamID: f.UpstreamID,
		Hold: billing.Hold{UserID: f.ID.User.ID, TokenID: f.ID.Token.ID}}
}

// bill settles a row of the session; the first takes the session's usage
// slot. Called with mu held.
func (s *realtimeSession) bill(x *engine.Exchange) {
	if !s.firstSlotClaimed {
		s.firstSlotClaimed = true
		x.Slot, s.first.Slot = s.first.Slot, false
	} else {
		x.Slot = s.h.app.db.writer.Admit(true) == nil
	}
	x.Status = http.StatusOK
	s.rows++
	s.h.engine.Settle(x)
}

// settleResponse bills a finished response; it returns the error that
// ends the session when the user cannot afford the next response.
func (s *realtimeSession) settleResponse(id string, u adapters.Usage) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.active[id]
	if !ok {
		x = s.newRow() // a response whose start was not seen
	}
	delete(s.active, id)
	x.Usage = u
	s.ticket.Used(time.Now(), u.PromptTokens+u.CompletionTokens)
	s.bill(x)
	select {
	case s.doneCh <- struct{}{}:
	default:
	}
	if len(s.pending) > 0 {
		return nil
	}
	hold, amount, ok := s.reserveResponse()
	if !ok {
		return quotaError("your quota does not cover another Realtime response (each reserves up to " + formatUnits(amount) +
			"), so the gateway ended the session: top up your account and reconnect")
	}
	s.pending = append(s.pending, hold)
	return nil
}

// transcribe reserves for millis of audio the upstream will transcribe,
// billing the block under way when it is full.
func (s *realtimeSession) transcribe(millis int64) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transcribing != nil && s.txMillis+millis > s.txCap {
		s.billTranscription()
	}
	if s.transcribing == nil {
		x := s.newRow()
		x.Req = &adapters.Request{Op: adapters.OpRealtime, Dialect: x.Req.Dialect, Model: x.Req.Model, Stream: true, Media: &adapters.MediaRequest{}}
		x.Media = &engine.Media{}
		capMillis := max(int64(transcriptionBlock), millis)
		amount := x.Price.AudioCost(capMillis)
		ad, err := s.h.app.gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount)})
		hold := ad.Hold
		if err != nil {
			return quotaError("your quota does not cover transcribing more of this session's audio (each minute reserves " + formatUnits(amount) +
				"), so the gateway ended the session: top up your account and reconnect")
		}
		x.Hold = hold
		s.transcribing, s.txMillis, s.txCap = x, 0, capMillis
	}
	s.txMillis += millis
	return nil
}

// billTranscription bills the block of transcribed audio under way for the
// audio it covered. Called with mu held.
func (s *realtimeSession) billTranscription() {
	x := s.transcribing
	if x == nil {
		return
	}
	s.transcribing = nil
	x.Media.Usage = adapters.MediaUsage{AudioMillis: s.txMillis, AudioKnown: true}
	s.bill(x)
}

// cancelResponses, when a session ends mid-response (the client left, the
// configuration was unloaded), asks the upstream to cancel the responses
// under way and waits a while for their response.done, which say what
// they used; otherwise what was generated would go unbilled.
func (s *realtimeSession) cancelResponses(ctx context.Context) {
	for _, id := range s.activeIDs() {
		if s.up.Write(ctx, websocket.MessageText, s.sess.Cancel(id)) != nil {
			return
		}
	}
	deadline := time.After(closeWait)
	for len(s.activeIDs()) > 0 {
		select {
		case <-s.doneCh:
		case <-deadline:
			s.h.log.Warn("a cancelled Realtime response reported no usage", zap.String("channel", s.ch.Name))
			return
		}
	}
}

// finish settles what the session still holds: the transcribed audio is
// billed, the reservations of responses that never started or never
// finished are released (and the session's own row written, when nothing
// was billed), and the rate limits are let go.
func (s *realtimeSession) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticket.Done(time.Now(), 0) // its responses' tokens were counted as they ended
	s.billTranscription()
	ledger := s.h.app.db.ledger
	for _, hold := range s.pending {
		ledger.Settle(hold, 0)
	}
	for _, x := range s.active {
		ledger.Settle(x.Hold, 0)
	}
	s.pending, s.active = nil, nil
	if s.rows == 0 {
		if s.status >= 400 {
			s.first.Status, s.first.ErrMsg = s.status, s.errMsg
		}
		s.h.engine.Settle(s.first) // the session's row, a refusal's too
		return
	}
	// its rows are the responses' and the transcriptions'; why it ended
	// goes to the log
	if s.status >= 400 {
		s.h.log.Warn("realtime session ended", zap.String("channel", s.ch.Name), zap.Int("rows", s.rows),
			zap.Int("status", s.status), zap.String("reason", s.errMsg))
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
