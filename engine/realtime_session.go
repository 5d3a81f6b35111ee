package engine

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/routing"
)

// A Realtime session is a WebSocket the gateway accepts from the client
// once the key, the model and the quota are checked, and a second one it
// opens to the channel's upstream with the channel's key. Two pumps copy
// messages, one per direction, each in order; close codes and reasons
// cross in both directions.
//
// Every cost a session can cause is reserved before it is relayed, on
// the session's state as the upstream reports it (a client's
// session.update counts once the upstream accepts it: input audio sent
// after one waits for its answer, within response_header_timeout). Each
// response holds a reservation of its own while it runs (several may run
// at once: out-of-band responses, or one the upstream's turn detection
// starts): the session always holds one for the next response, a client's
// response.create beyond that reserves before it is relayed (or is
// refused with an error event), each for what it reads (the conversation
// and what was added to it since, or its own input) and writes, the
// waiting ones raised as items and audio are added; and the adapter caps
// every response's output at what was reserved, the session's default
// included (Setup).
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
//
// The server layer accepts the client's socket (an HTTP/1.1 upgrade or an
// HTTP/2 extended CONNECT) and hands it to Relay; the rest is here.

// Close codes the gateway uses itself.
const (
	closeQuota     = websocket.StatusPolicyViolation // 1008
	closeIdle      = websocket.StatusGoingAway       // 1001
	closeGoingAway = websocket.StatusGoingAway       // 1001
	closeUpstream  = websocket.StatusInternalError   // 1011
)

// closeWait bounds the close handshake with either peer.
const closeWait = 5 * time.Second

// RealtimeSession is one relayed session and its billing. Its life:
// NewRealtimeSession, Open, then Relay with the client's socket (or Abort
// when it cannot be accepted), and Finish in every case.
type RealtimeSession struct {
	e      *Engine
	first  *Exchange // the session's own exchange: its slot, its rate-limit ticket
	client *websocket.Conn
	up     *websocket.Conn
	ch     *routing.Channel
	bounds Bounds
	sess   adapters.RealtimeSession
	// dialect is the client's, for error events
	dialect adapters.RealtimeDialect
	// config is the session configuration the session starts with (a
	// client secret's), nil for none
	config  []byte
	ticket  billing.Ticket
	last    atomic.Int64 // unix nanoseconds of the last message either way
	closing sync.Once
	ended   chan struct{} // closed once the session ends
	// clientGone: the client cannot be written to
	clientGone atomic.Bool

	mu sync.Mutex // guards what follows, which both pumps change
	// pending are reservations for responses not yet started: one for the
	// next, and one more for each relayed response.create beyond it;
	// asked counts the response.create relayed and not yet started
	pending []billing.Hold
	asked   int
	// context is the conversation's size as the last response.done
	// reported it (its tokens in and out), which the next response reads
	context int64
	// added bounds what the client added to the conversation since the
	// responses that read it started (items, audio, instructions), which
	// the next response reads beyond context; readAt holds, for each
	// response under way that reads the conversation, what was added when
	// it started (its usage covers that). seen bounds all the session's
	// content, which an item_reference may name.
	added, seen adapters.RealtimeInput
	readAt      map[string]adapters.RealtimeInput
	// active are the responses under way, by id; doneCh is told when one
	// ends
	active map[string]*Exchange
	doneCh chan struct{}
	// transcribing is the block of transcribed audio under way: its
	// reservation covers txCap milliseconds, txMillis are used
	transcribing     *Exchange
	txMillis, txCap  int64
	rows             int  // usage rows written
	firstSlotClaimed bool // a row took the session's usage slot
	status           int  // why the session ended, when it failed
	errMsg           string
}

// NewRealtimeSession starts the session of x, a Realtime request
// (x.Req.Model the model); its Finish writes x's row.
func (e *Engine) NewRealtimeSession(x *Exchange) *RealtimeSession {
	return &RealtimeSession{e: e, first: x, active: map[string]*Exchange{}, readAt: map[string]adapters.RealtimeInput{},
		doneCh: make(chan struct{}, 1), ended: make(chan struct{})}
}

// Configure sets the session configuration (a JSON object) the session
// starts with: Open sends it upstream after the session's limits, within
// them, as if the client had sent it first.
func (s *RealtimeSession) Configure(config []byte) { s.config = config }

// Open admits the session (its rate limits held for the whole session, its
// first response reserved), opens the upstream socket and sends the
// session's limits to it.
func (s *RealtimeSession) Open() *adapters.Error {
	x := s.first
	if e := s.e.Admit(x); e != nil {
		return e
	}
	// the rate limits (max_parallel) are held for the whole session
	s.ticket, x.Ticket = x.Ticket, billing.Ticket{}
	up, ch, e := s.e.dialRealtime(x, x.Req.Model)
	if e != nil {
		return e
	}
	s.up, s.ch = up, ch
	x.Channel = ch.Name
	u := s.e.Upstreams.Get(ch.Name)
	if u == nil {
		up.CloseNow()
		return removedChannel(ch).Err
	}
	s.bounds = u.Bounds
	s.sess = u.Provider.(adapters.RealtimeProvider).RealtimeSession(x.R, adapters.RealtimeLimits{
		MaxOutputTokens: s.e.RealtimeOutput(x.Price),
		Transcription:   x.Price.Free || x.Price.AudioSecond > 0,
	})
	if setup := s.sess.Setup(); setup != nil {
		// before any client event, so that the upstream applies it first
		if err := up.Write(x.R.Context(), websocket.MessageText, setup); err != nil {
			up.CloseNow()
			return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream channel %q could not open a Realtime session", ch.Name)
		}
	}
	if s.config != nil {
		out, _, e := s.sess.ClientEvent(s.sess.Configure(s.config))
		if e != nil {
			up.CloseNow()
			return e
		}
		if err := up.Write(x.R.Context(), websocket.MessageText, out); err != nil {
			up.CloseNow()
			return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream channel %q could not open a Realtime session", ch.Name)
		}
	}
	return nil
}

// Abort closes the upstream socket of a session whose client socket could
// not be accepted.
func (s *RealtimeSession) Abort() {
	if s.up != nil {
		s.up.CloseNow()
	}
}

// Relay runs the two pumps between the client's socket and the upstream's
// until the session ends; unloaded is closed when the configuration is
// unloaded (a reload, a shutdown), which ends the session.
func (s *RealtimeSession) Relay(client *websocket.Conn, dialect adapters.RealtimeDialect, unloaded <-chan struct{}) {
	s.client, s.dialect = client, dialect
	// the admission's reservation is the first response's (a session that
	// ends before this settles it with its own row, as any request)
	s.mu.Lock()
	s.pending = []billing.Hold{s.first.Hold}
	s.first.Hold = billing.Hold{}
	s.mu.Unlock()
	b := s.bounds
	s.client.SetReadLimit(int64(b.MaxStreamEvent))
	s.last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.pumpToUpstream() }()
	go func() { defer wg.Done(); s.pumpToClient() }()
	go func() { wg.Wait(); close(done) }()
	idle := time.NewTicker(max(b.StreamIdle/4, 10*time.Millisecond))
	defer idle.Stop()
	for {
		select {
		case <-done:
			return
		case <-unloaded:
			// as Caddy's reverse_proxy ends its WebSockets on a reload:
			// the client reconnects to the new configuration
			s.mark(http.StatusServiceUnavailable, "the gateway's configuration was unloaded")
			s.cancelResponses(context.Background())
			s.end(closeGoingAway, "the gateway is reloading or shutting down: reconnect", closeGoingAway, "")
			<-done
			return
		case <-idle.C:
			if time.Since(time.Unix(0, s.last.Load())) > b.StreamIdle {
				s.mark(http.StatusGatewayTimeout, "the session was idle for "+b.StreamIdle.String())
				s.end(closeIdle, "idle for "+b.StreamIdle.String(), closeIdle, "idle")
				<-done
				return
			}
		}
	}
}

// end closes both sockets once, each with its own code and reason.
func (s *RealtimeSession) end(clientCode websocket.StatusCode, clientReason string, upCode websocket.StatusCode, upReason string) {
	s.closing.Do(func() {
		close(s.ended)
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
func (s *RealtimeSession) pumpToUpstream() {
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
			for e == nil && ev.AwaitState {
				// priced on the state the upstream accepts, which its
				// answer to a session.update under way says
				if !s.awaitState() {
					return
				}
				out, ev, e = s.sess.ClientEvent(msg)
			}
			if e == nil && ev.CreatesResponse {
				e = s.askResponse(ev)
			} else if e == nil && (ev.Adds.Text > 0 || ev.Adds.Audio > 0) {
				e = s.addInput(ev.Adds)
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

// awaitState waits for the upstream's answer to the session.updates under
// way, within the channel's response_header_timeout: an upstream that does
// not answer ends the session, as one that does not answer a request.
// False when the session ended.
func (s *RealtimeSession) awaitState() bool {
	wait := s.bounds.ResponseHeader
	if wait <= 0 {
		wait = time.Minute
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.sess.Settled():
		return true
	case <-s.ended:
	case <-t.C:
		s.mark(http.StatusGatewayTimeout, "the upstream did not answer a session.update within "+wait.String())
		s.cancelResponses(context.Background())
		s.end(closeUpstream, "the upstream did not answer a session.update", websocket.StatusNormalClosure, "")
	}
	return false
}

// pumpToClient copies the upstream's messages to the client, in order,
// billing each response.done after relaying it.
func (s *RealtimeSession) pumpToClient() {
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
			s.e.Log.Warn("the upstream refused the Realtime session's limits", zap.String("channel", s.ch.Name), zap.String("error", ev.Message))
			s.mark(http.StatusBadGateway, "the upstream refused the session's output limit")
			_ = s.client.Write(ctx, websocket.MessageText, s.dialect.RealtimeError(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
				"the upstream refused the gateway's limits for this session, so the gateway ended it")))
			s.end(closeUpstream, "the upstream refused the session's limits", websocket.StatusNormalClosure, "")
			return
		case adapters.RealtimeResponseStarted:
			if !s.started(ev.ResponseID, ev.InConversation) {
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

// cancelResponses, when a session ends mid-response (the client left, the
// configuration was unloaded), asks the upstream to cancel the responses
// under way and waits a while for their response.done, which say what
// they used; otherwise what was generated would go unbilled.
func (s *RealtimeSession) cancelResponses(ctx context.Context) {
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
			s.e.Log.Warn("a cancelled Realtime response reported no usage", zap.String("channel", s.ch.Name))
			return
		}
	}
}

// mark records why the session ended.
func (s *RealtimeSession) mark(status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.errMsg = status, msg
}
