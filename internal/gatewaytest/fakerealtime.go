package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// FakeOpenAI's Realtime API, as OpenAI's reference describes it: GET
// /v1/realtime?model=... upgraded to a WebSocket with the key as a Bearer
// token (401 before the upgrade otherwise); session.created on connect;
// session.update answered by session.updated, conversation.item.create by
// conversation.item.created, input_audio_buffer.commit by
// input_audio_buffer.committed, and response.create by response.created,
// the reply's text deltas a word each, and response.done with the usage
// set by SetRealtimeUsage. A client event it does not know gets an error
// event. The beta interface's event names are used when the socket was
// opened with OpenAI-Beta: realtime=v1.

// RealtimeUsage is what the fake's response.done reports. Input totals
// include their cached tokens, as OpenAI counts them.
type RealtimeUsage struct {
	InputText, InputAudio, CachedText, CachedAudio, OutputText, OutputAudio int64
}

// RealtimeClose is a close frame the fake received.
type RealtimeClose struct {
	Code   int
	Reason string
}

type realtimeState struct {
	mu       sync.Mutex
	usage    RealtimeUsage
	events   []string // client event types received, in order
	closes   []RealtimeClose
	sessions map[*websocket.Conn]bool
}

// SetRealtimeUsage sets what each response.done reports.
func (f *FakeOpenAI) SetRealtimeUsage(u RealtimeUsage) {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	f.rt.usage = u
}

// RealtimeEvents are the types of the client events received, in order.
func (f *FakeOpenAI) RealtimeEvents() []string {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	return append([]string(nil), f.rt.events...)
}

// RealtimeCloses are the close frames the gateway sent the fake.
func (f *FakeOpenAI) RealtimeCloses() []RealtimeClose {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	return append([]RealtimeClose(nil), f.rt.closes...)
}

// CloseRealtime closes every open session with code and reason.
func (f *FakeOpenAI) CloseRealtime(code int, reason string) {
	f.rt.mu.Lock()
	conns := make([]*websocket.Conn, 0, len(f.rt.sessions))
	for c := range f.rt.sessions {
		conns = append(conns, c)
	}
	f.rt.mu.Unlock()
	for _, c := range conns {
		_ = c.Close(websocket.StatusCode(code), reason)
	}
}

func (f *FakeOpenAI) realtime(w http.ResponseWriter, r *http.Request) {
	cfg, _ := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Model: r.URL.Query().Get("model")})
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if cfg.FailStatus != 0 {
		writeOpenAIError(w, cfg.FailStatus, "server_error", "The server had an error while processing your request.")
		return
	}
	model := r.URL.Query().Get("model")
	if model == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'model'.")
		return
	}
	beta := strings.Contains(r.Header.Get("OpenAI-Beta"), "realtime=v1")
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(16 << 20)
	f.rt.mu.Lock()
	if f.rt.sessions == nil {
		f.rt.sessions = map[*websocket.Conn]bool{}
	}
	f.rt.sessions[c] = true
	f.rt.mu.Unlock()
	defer func() {
		f.rt.mu.Lock()
		delete(f.rt.sessions, c)
		f.rt.mu.Unlock()
		c.CloseNow()
	}()
	s := &fakeSession{c: c, beta: beta, reply: cfg.Reply, delay: cfg.ChunkDelay}
	s.session = map[string]any{"id": "sess_fake1", "object": "realtime.session", "model": model,
		"modalities": []string{"text", "audio"}, "voice": "alloy", "instructions": "", "turn_detection": nil}
	ctx := context.Background()
	s.send(ctx, map[string]any{"type": "session.created", "session": s.session})
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			s.stop(nil)
			s.wg.Wait()
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				f.rt.mu.Lock()
				f.rt.closes = append(f.rt.closes, RealtimeClose{Code: int(ce.Code), Reason: ce.Reason})
				f.rt.mu.Unlock()
			}
			return
		}
		var ev map[string]any
		if json.Unmarshal(msg, &ev) != nil {
			s.fail(ctx, "", "invalid_json", "The client event is not valid JSON.")
			continue
		}
		typ, _ := ev["type"].(string)
		eventID, _ := ev["event_id"].(string)
		f.rt.mu.Lock()
		f.rt.events = append(f.rt.events, typ)
		usage := f.rt.usage
		f.rt.mu.Unlock()
		switch typ {
		case "session.update":
			if upd, ok := ev["session"].(map[string]any); ok {
				for k, v := range upd {
					s.session[k] = v
				}
			}
			s.send(ctx, map[string]any{"type": "session.updated", "session": s.session})
		case "conversation.item.create":
			item, _ := ev["item"].(map[string]any)
			if item == nil {
				s.fail(ctx, eventID, "missing_required_parameter", "Missing required parameter: 'item'.")
				continue
			}
			item["id"] = s.newItem()
			item["object"] = "realtime.item"
			item["status"] = "completed"
			s.send(ctx, map[string]any{"type": "conversation.item.created", "previous_item_id": nil, "item": item})
		case "input_audio_buffer.append":
		case "input_audio_buffer.commit":
			s.send(ctx, map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": nil, "item_id": s.newItem()})
		case "response.create":
			cancel, ok := s.start()
			if !ok {
				s.fail(ctx, eventID, "conversation_already_has_active_response", "Conversation already has an active response in progress.")
				continue
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.respond(ctx, usage, cancel) }()
		case "response.cancel":
			s.stop(nil)
		default:
			s.fail(ctx, eventID, "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'session.update', 'input_audio_buffer.append', 'input_audio_buffer.commit', 'conversation.item.create', 'response.create' and 'response.cancel'.", typ))
		}
	}
}

// fakeSession is one socket's state. A response plays in its own
// goroutine, Behavior.ChunkDelay before each delta, so response.cancel
// can cut it short.
type fakeSession struct {
	c         *websocket.Conn
	beta      bool
	reply     string
	delay     time.Duration
	session   map[string]any
	items     int
	responses int
	events    atomic.Int64
	mu        sync.Mutex
	active    chan struct{} // the response under way, closed to cancel it
	wg        sync.WaitGroup
}

// newItem names a new conversation item.
func (s *fakeSession) newItem() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items++
	return fmt.Sprintf("item_fake%d", s.items)
}

// start begins a response, unless one is under way.
func (s *fakeSession) start() (chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		return nil, false
	}
	s.active = make(chan struct{})
	return s.active, true
}

// stop cancels the response under way (which: nil for any) or forgets a
// finished one.
func (s *fakeSession) stop(which chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil && (which == nil || which == s.active) {
		if which == nil {
			close(s.active)
		}
		s.active = nil
	}
}

func (s *fakeSession) send(ctx context.Context, ev map[string]any) {
	ev["event_id"] = fmt.Sprintf("event_fake%d", s.events.Add(1))
	b, _ := json.Marshal(ev)
	_ = s.c.Write(ctx, websocket.MessageText, b)
}

func (s *fakeSession) fail(ctx context.Context, eventID, code, msg string) {
	var id any
	if eventID != "" {
		id = eventID
	}
	s.send(ctx, map[string]any{"type": "error", "error": map[string]any{
		"type": "invalid_request_error", "code": code, "message": msg, "param": nil, "event_id": id}})
}

// respond plays one text response: created, a delta a word, done; a
// cancelled one ends early, done with status "cancelled" and its usage.
func (s *fakeSession) respond(ctx context.Context, u RealtimeUsage, cancel chan struct{}) {
	s.mu.Lock()
	s.responses++
	s.items++
	id, item := fmt.Sprintf("resp_fake%d", s.responses), fmt.Sprintf("item_fake%d", s.items)
	s.mu.Unlock()
	delta, textDone := "response.output_text.delta", "response.output_text.done"
	if s.beta {
		delta, textDone = "response.text.delta", "response.text.done"
	}
	s.send(ctx, map[string]any{"type": "response.created", "response": map[string]any{
		"id": id, "object": "realtime.response", "status": "in_progress", "status_details": nil, "output": []any{}, "usage": nil}})
	status := "completed"
	var details any
words:
	for _, w := range splitWords(s.reply) {
		select {
		case <-cancel:
			status, details = "cancelled", map[string]any{"type": "cancelled", "reason": "client_cancelled"}
			break words
		case <-time.After(s.delay):
		}
		s.send(ctx, map[string]any{"type": delta, "response_id": id, "item_id": item, "output_index": 0, "content_index": 0, "delta": w})
	}
	// the next response may be asked for as soon as this one is done
	s.stop(cancel)
	if status == "completed" {
		s.send(ctx, map[string]any{"type": textDone, "response_id": id, "item_id": item, "output_index": 0, "content_index": 0, "text": s.reply})
	}
	s.send(ctx, map[string]any{"type": "response.done", "response": map[string]any{
		"id": id, "object": "realtime.response", "status": status, "status_details": details,
		"output": []any{map[string]any{"id": item, "object": "realtime.item", "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "text", "text": s.reply}}}},
		"usage": map[string]any{
			"total_tokens": u.InputText + u.InputAudio + u.OutputText + u.OutputAudio,
			"input_tokens": u.InputText + u.InputAudio, "output_tokens": u.OutputText + u.OutputAudio,
			"input_token_details": map[string]any{"text_tokens": u.InputText, "audio_tokens": u.InputAudio, "cached_tokens": u.CachedText + u.CachedAudio,
				"cached_tokens_details": map[string]any{"text_tokens": u.CachedText, "audio_tokens": u.CachedAudio}},
			"output_token_details": map[string]any{"text_tokens": u.OutputText, "audio_tokens": u.OutputAudio},
		},
	}})
}
