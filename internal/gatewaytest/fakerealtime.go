package gatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// FakeOpenAI's Realtime API, as OpenAI's reference describes it: GET
// /v1/realtime?model=... upgraded to a WebSocket with the key as a Bearer
// token (401 before the upgrade otherwise); session.created on connect;
// session.update answered by session.updated with the whole session as it
// then is (objects merged member by member), or refused whole by an error
// event naming it (an input format or a transcription model the reference
// does not list), conversation.item.create by
// conversation.item.created, input_audio_buffer.commit by
// input_audio_buffer.committed, and response.create by response.created,
// the reply's text deltas a word each, and response.done with the usage
// set by SetRealtimeUsage, its output cut to the response's cap
// (response.max_output_tokens, else the session's, "inf" by default;
// max_response_output_tokens in the beta) with status "incomplete". One
// response at a time runs in the default conversation; out-of-band ones
// (response.conversation "none") run beside it. With server_vad turn
// detection each input_audio_buffer.append is taken as a whole spoken
// turn: speech started and stopped, the buffer committed, and a response
// created (unless create_response is false). With input audio
// transcription on, each committed buffer gets a
// conversation.item.input_audio_transcription.completed with its
// duration. A client event it does not know gets an error event. The beta
// interface's event names are used when the socket was opened with
// OpenAI-Beta: realtime=v1. A response names the conversation it joins
// (conversation_id, null for an out-of-band one).

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
	caps     []int64  // each response's output cap, -1 for "inf"
	closes   []RealtimeClose
	sessions map[*websocket.Conn]bool
	// silent: session.update is never answered (a fault)
	silent bool
}

// SetRealtimeSilentUpdates makes the fake leave every session.update
// unanswered (neither session.updated nor an error), as a stuck upstream.
func (f *FakeOpenAI) SetRealtimeSilentUpdates(silent bool) {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	f.rt.silent = silent
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

// RealtimeCaps are the output caps the responses ran with, in order of
// their start; -1 is "inf".
func (f *FakeOpenAI) RealtimeCaps() []int64 {
	f.rt.mu.Lock()
	defer f.rt.mu.Unlock()
	return append([]int64(nil), f.rt.caps...)
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
	s.session = map[string]any{"id": "sess_fake1", "object": "realtime.session", "model": model, "instructions": ""}
	if beta {
		s.session["modalities"] = []any{"text", "audio"}
		s.session["voice"] = "alloy"
		s.session["turn_detection"] = nil
		s.session["input_audio_format"] = "pcm16"
		s.session["input_audio_transcription"] = nil
	} else {
		s.session["type"] = "realtime"
		s.session["output_modalities"] = []any{"audio"}
		s.session["audio"] = map[string]any{
			"input":  map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 24000.0}, "transcription": nil, "turn_detection": nil},
			"output": map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 24000.0}, "voice": "alloy"},
		}
	}
	s.session[s.capKey()] = "inf"
	ctx := context.Background()
	s.send(ctx, map[string]any{"type": "session.created", "session": s.session})
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			s.stopAll()
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
		usage, silent := f.rt.usage, f.rt.silent
		f.rt.mu.Unlock()
		switch typ {
		case "session.update":
			if silent {
				continue
			}
			upd, ok := ev["session"].(map[string]any)
			if !ok {
				s.fail(ctx, eventID, "missing_required_parameter", "Missing required parameter: 'session'.")
				continue
			}
			if code, msg := s.refuseUpdate(upd); code != "" {
				// refused whole: nothing of it applies
				s.fail(ctx, eventID, code, msg)
				continue
			}
			s.mu.Lock()
			merge(s.session, upd)
			s.mu.Unlock()
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
			if !s.vad() {
				continue
			}
			s.send(ctx, map[string]any{"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": ""})
			s.send(ctx, map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 1000, "item_id": ""})
			audio, _ := ev["audio"].(string)
			s.commit(ctx, audio)
			if s.vadResponds() {
				s.startResponse(ctx, f, "", nil, usage)
			}
		case "input_audio_buffer.commit":
			s.commit(ctx, "")
		case "response.create":
			resp, _ := ev["response"].(map[string]any)
			s.startResponse(ctx, f, eventID, resp, usage)
		case "response.cancel":
			id, _ := ev["response_id"].(string)
			s.stop(id)
		default:
			s.fail(ctx, eventID, "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'session.update', 'input_audio_buffer.append', 'input_audio_buffer.commit', 'conversation.item.create', 'response.create' and 'response.cancel'.", typ))
		}
	}
}

// Transcription models and input formats OpenAI's reference lists; an
// update naming another is refused.
var (
	fakeTranscriptionModels = []string{"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"}
	fakeBetaFormats         = []string{"pcm16", "g711_ulaw", "g711_alaw"}
	fakeFormats             = []string{"audio/pcm", "audio/pcmu", "audio/pcma"}
)

// refuseUpdate is the error code and message refusing a session.update,
// "" for one the fake accepts.
func (s *fakeSession) refuseUpdate(upd map[string]any) (string, string) {
	transcription, format := upd["input_audio_transcription"], upd["input_audio_format"]
	if audio, ok := upd["audio"].(map[string]any); ok && !s.beta {
		in, _ := audio["input"].(map[string]any)
		transcription, format = in["transcription"], in["format"]
	}
	if t, ok := transcription.(map[string]any); ok {
		if m, _ := t["model"].(string); !slices.Contains(fakeTranscriptionModels, m) {
			return "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'whisper-1', 'gpt-4o-transcribe', and 'gpt-4o-mini-transcribe'.", m)
		}
	}
	switch f := format.(type) {
	case nil:
	case string:
		if !s.beta || !slices.Contains(fakeBetaFormats, f) {
			return "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'pcm16', 'g711_ulaw', and 'g711_alaw'.", f)
		}
	case map[string]any:
		typ, _ := f["type"].(string)
		rate, hasRate := f["rate"].(float64)
		if s.beta || !slices.Contains(fakeFormats, typ) || (typ == "audio/pcm" && hasRate && rate != 24000) {
			return "invalid_value", fmt.Sprintf("Invalid value: '%v'. Supported formats are: audio/pcm at 24000 Hz, audio/pcmu and audio/pcma.", f)
		}
	default:
		return "invalid_type", "Invalid type for 'session.audio.input.format'."
	}
	return "", ""
}

// merge applies a session.update to the session: objects member by
// member, any other value replaced.
func merge(dst, upd map[string]any) {
	for k, v := range upd {
		sub, ok := v.(map[string]any)
		cur, isMap := dst[k].(map[string]any)
		if ok && isMap {
			merge(cur, sub)
			continue
		}
		dst[k] = v
	}
}

// startResponse plays a response in its own goroutine, unless the
// default conversation already has one.
func (s *fakeSession) startResponse(ctx context.Context, f *FakeOpenAI, eventID string, resp map[string]any, usage RealtimeUsage) {
	inBand := resp == nil || resp["conversation"] != "none"
	limit := s.capOf(resp)
	id, cancel, ok := s.start(inBand)
	if !ok {
		s.fail(ctx, eventID, "conversation_already_has_active_response", "Conversation already has an active response in progress.")
		return
	}
	f.rt.mu.Lock()
	f.rt.caps = append(f.rt.caps, limit)
	f.rt.mu.Unlock()
	s.wg.Add(1)
	var conversation any // GA names the conversation a response joins, null for none
	if inBand {
		conversation = "conv_fake1"
	}
	go func() { defer s.wg.Done(); s.respond(ctx, id, conversation, usage, limit, cancel) }()
}

// capKey names the output cap in the interface the session speaks.
func (s *fakeSession) capKey() string {
	if s.beta {
		return "max_response_output_tokens"
	}
	return "max_output_tokens"
}

// capOf is a response's output cap: its own, else the session's; -1 for
// "inf".
func (s *fakeSession) capOf(resp map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := resp[s.capKey()]
	if !ok {
		v = s.session[s.capKey()]
	}
	if n, ok := v.(float64); ok {
		return int64(n)
	}
	return -1
}

// input is the session's audio.input (GA) or the session itself (beta).
func (s *fakeSession) input(key string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.beta {
		if key == "transcription" || key == "format" {
			key = "input_audio_" + key
		}
		return s.session[key]
	}
	audio, _ := s.session["audio"].(map[string]any)
	in, _ := audio["input"].(map[string]any)
	return in[key]
}

// vad reports whether server turn detection is on.
func (s *fakeSession) vad() bool {
	td, _ := s.input("turn_detection").(map[string]any)
	return td != nil && td["type"] == "server_vad"
}

// vadResponds reports whether turn detection creates responses.
func (s *fakeSession) vadResponds() bool {
	td, _ := s.input("turn_detection").(map[string]any)
	create, set := td["create_response"].(bool)
	return !set || create
}

// commit commits the input buffer; with transcription on, the item's
// transcript follows with the audio's duration (24 kHz 16-bit PCM).
func (s *fakeSession) commit(ctx context.Context, audio string) {
	item := s.newItem()
	s.send(ctx, map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": nil, "item_id": item})
	if t, _ := s.input("transcription").(map[string]any); t == nil {
		return
	}
	seconds := float64(len(audio)) * 3 / 4 / float64(s.bytesPerSecond())
	s.send(ctx, map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": item, "content_index": 0,
		"transcript": "Hello.", "usage": map[string]any{"type": "duration", "seconds": seconds}})
}

// bytesPerSecond is the session's input audio rate.
func (s *fakeSession) bytesPerSecond() int {
	switch f := s.input("format").(type) {
	case string:
		if strings.HasPrefix(f, "g711") {
			return 8000
		}
	case map[string]any:
		if f["type"] != "audio/pcm" {
			return 8000
		}
	}
	return 48000
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
	// running responses by id, each closed to cancel it; inBand is the
	// default conversation's
	running map[string]chan struct{}
	inBand  string
	wg      sync.WaitGroup
}

// newItem names a new conversation item.
func (s *fakeSession) newItem() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items++
	return fmt.Sprintf("item_fake%d", s.items)
}

// start begins a response, unless one is under way in the default
// conversation and this one would be too.
func (s *fakeSession) start(inBand bool) (string, chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inBand && s.inBand != "" {
		return "", nil, false
	}
	s.responses++
	id := fmt.Sprintf("resp_fake%d", s.responses)
	if s.running == nil {
		s.running = map[string]chan struct{}{}
	}
	s.running[id] = make(chan struct{})
	if inBand {
		s.inBand = id
	}
	return id, s.running[id], true
}

// stop cancels a response: id, or the default conversation's for "".
func (s *fakeSession) stop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		id = s.inBand
	}
	if c, ok := s.running[id]; ok {
		close(c)
		s.forget(id)
	}
}

// stopAll cancels every response.
func (s *fakeSession) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.running {
		close(c)
		s.forget(id)
	}
}

// forget drops a response from those running; mu is held.
func (s *fakeSession) forget(id string) {
	delete(s.running, id)
	if s.inBand == id {
		s.inBand = ""
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
// Output past the cap is not written: status "incomplete".
func (s *fakeSession) respond(ctx context.Context, id string, conversation any, u RealtimeUsage, limit int64, cancel chan struct{}) {
	s.mu.Lock()
	s.items++
	item := fmt.Sprintf("item_fake%d", s.items)
	s.mu.Unlock()
	delta, textDone := "response.output_text.delta", "response.output_text.done"
	if s.beta {
		delta, textDone = "response.text.delta", "response.text.done"
	}
	s.send(ctx, map[string]any{"type": "response.created", "response": map[string]any{
		"id": id, "object": "realtime.response", "conversation_id": conversation, "status": "in_progress", "status_details": nil, "output": []any{}, "usage": nil}})
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
	s.mu.Lock()
	if s.running[id] == cancel {
		s.forget(id)
	}
	s.mu.Unlock()
	if limit >= 0 && u.OutputText+u.OutputAudio > limit {
		u.OutputAudio = min(u.OutputAudio, limit)
		u.OutputText = min(u.OutputText, limit-u.OutputAudio)
		if status == "completed" {
			status, details = "incomplete", map[string]any{"type": "incomplete", "reason": "max_output_tokens"}
		}
	}
	if status == "completed" {
		s.send(ctx, map[string]any{"type": textDone, "response_id": id, "item_id": item, "output_index": 0, "content_index": 0, "text": s.reply})
	}
	s.send(ctx, map[string]any{"type": "response.done", "response": map[string]any{
		"id": id, "object": "realtime.response", "conversation_id": conversation, "status": status, "status_details": details,
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
