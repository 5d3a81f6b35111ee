package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// OpenAI's Realtime API: GET /v1/realtime?model=... upgraded to a
// WebSocket, with the key as a Bearer token, or, from browsers, which
// cannot set headers on a socket, as the subprotocol
// "openai-insecure-api-key.<key>" beside "realtime".
const (
	realtimePath        = "/v1/realtime"
	keySubprotocol      = "openai-insecure-api-key."
	betaSubprotocol     = "openai-beta.realtime-v1"
	realtimeSubprotocol = "realtime"
)

// subprotocols lists the client's offered WebSocket subprotocols.
func subprotocols(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Sec-Websocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// subprotocolKey is the key a browser put in its subprotocols, or "".
func subprotocolKey(r *http.Request) string {
	if r.URL.Path != realtimePath {
		return ""
	}
	for _, p := range subprotocols(r.Header) {
		if k, ok := strings.CutPrefix(p, keySubprotocol); ok {
			return k
		}
	}
	return ""
}

// stripSubprotocolKey removes the key subprotocol, keeping the others for
// the negotiation.
func stripSubprotocolKey(r *http.Request) {
	offered := subprotocols(r.Header)
	kept := offered[:0]
	for _, p := range offered {
		if !strings.HasPrefix(p, keySubprotocol) {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(subprotocols(r.Header)) {
		return
	}
	if len(kept) == 0 {
		r.Header.Del("Sec-Websocket-Protocol")
		return
	}
	r.Header.Set("Sec-Websocket-Protocol", strings.Join(kept, ", "))
}

// RealtimeSubprotocols implements adapters.RealtimeDialect: OpenAI answers
// a browser's "realtime" (and the beta marker it sends) with "realtime".
func (Adapter) RealtimeSubprotocols() []string { return []string{realtimeSubprotocol} }

// RealtimeError implements adapters.RealtimeDialect: the Realtime API's
// error server event.
func (Adapter) RealtimeError(e *adapters.Error) []byte {
	type detail struct {
		Type    string  `json:"type"`
		Code    string  `json:"code,omitempty"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
		EventID *string `json:"event_id"`
	}
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
		Error   detail `json:"error"`
	}{"error", "event_gateway_" + string(e.Type), detail{Type: string(e.Type), Code: e.Code, Message: e.Message}})
	return b
}

// RealtimeDial implements adapters.RealtimeProvider: wss:// (ws:// for an
// http base URL) {base}/v1/realtime?model=..., the key as a Bearer token,
// and the beta header when the client asked for the beta interface.
func (Adapter) RealtimeDial(up *adapters.Upstream, client *http.Request) (string, http.Header, error) {
	u, err := url.Parse(strings.TrimRight(up.BaseURL, "/") + realtimePath)
	if err != nil {
		return "", nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "channel %q has a base_url that is not a URL", up.Channel)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	u.RawQuery = url.Values{"model": {up.Model}}.Encode()
	h := http.Header{}
	if up.Key != "" {
		h.Set("Authorization", "Bearer "+up.Key)
	}
	if realtimeBeta(client) {
		h.Set("OpenAI-Beta", "realtime=v1")
	}
	return u.String(), h, nil
}

// realtimeBeta reports whether the client asked for the beta interface.
func realtimeBeta(client *http.Request) bool {
	beta := strings.Contains(client.Header.Get("Openai-Beta"), "realtime=v1")
	for _, p := range subprotocols(client.Header) {
		beta = beta || p == betaSubprotocol
	}
	return beta
}

// RealtimeSession implements adapters.RealtimeProvider.
func (Adapter) RealtimeSession(client *http.Request, limits adapters.RealtimeLimits) adapters.RealtimeSession {
	capKey := "max_output_tokens"
	if realtimeBeta(client) {
		capKey = "max_response_output_tokens"
	}
	// OpenAI takes a cap from 1 to 4096 (or "inf"): a larger limit is
	// more than any response writes
	return &realtimeSession{limits: limits, beta: capKey != "max_output_tokens", capKey: capKey,
		maxOutput: min(max(limits.MaxOutputTokens, 1), 4096),
		state:     realtimeState{bytesPerSecond: pcm16BytesPerSecond}, settled: make(chan struct{})}
}

// realtimeSession reads one session's events. The GA interface and the
// beta one name the output cap, the transcription and the audio format
// apart: max_output_tokens, audio.input.transcription and
// audio.input.format against max_response_output_tokens,
// input_audio_transcription and input_audio_format.
//
// What input audio costs follows the session's state as the upstream
// reports it (session.created, then each session.updated), never the
// client's session.update: an update the upstream refuses (an error event
// naming it) changes nothing. The upstream answers the updates in order
// and applies each before the events sent after it, so audio that follows
// an unanswered update waits for its answer (Settled) to be priced.
type realtimeSession struct {
	limits    adapters.RealtimeLimits
	beta      bool
	capKey    string
	maxOutput int64

	mu sync.Mutex // the two pumps share what follows
	// state is the upstream's; created: its session.created was read
	state   realtimeState
	created bool
	// awaiting are the event ids of the session.updates relayed and not
	// yet answered, in order (the gateway's own first)
	awaiting []string
	updates  int // client session.updates given an event id
	// settled is closed while created and nothing is awaited
	settled chan struct{}
}

// realtimeState is what a session's input audio costs: whether it is
// transcribed, and its format's rate.
type realtimeState struct {
	transcribing   bool
	bytesPerSecond int64
}

// Input audio rates: 16-bit PCM at 24 kHz, G.711 at 8 kHz, mono.
const (
	pcm16BytesPerSecond = 48000
	g711BytesPerSecond  = 8000
)

// setupEventID marks the gateway's own session.update, so an error
// answering it is told from the client's.
const setupEventID = "event_gateway_limits"

// Setup implements adapters.RealtimeSession: the session's own cap, which
// responses started by turn detection get, is lowered from "inf".
func (s *realtimeSession) Setup() []byte {
	s.mu.Lock()
	s.awaiting = append(s.awaiting, setupEventID)
	s.mu.Unlock()
	sess := map[string]any{s.capKey: s.maxOutput}
	if !s.beta {
		sess["type"] = "realtime" // GA's session.update names the session type
	}
	b, _ := json.Marshal(map[string]any{"type": "session.update", "event_id": setupEventID, "session": sess})
	return b
}

// configEventID marks the session.update that applies a client secret's
// configuration.
const configEventID = "event_gateway_client_secret"

// Configure implements adapters.RealtimeSession: a session.update with the
// configuration, less what names the session rather than configures it
// (its model is the socket's).
func (s *realtimeSession) Configure(session json.RawMessage) []byte {
	var cfg map[string]json.RawMessage
	if json.Unmarshal(session, &cfg) != nil {
		cfg = map[string]json.RawMessage{}
	}
	for _, k := range []string{"model", "object", "id", "expires_at", "client_secret"} {
		delete(cfg, k)
	}
	if !s.beta {
		cfg["type"] = json.RawMessage(`"realtime"`)
	}
	b, _ := json.Marshal(map[string]any{"type": "session.update", "event_id": configEventID, "session": cfg})
	return b
}

// Settled implements adapters.RealtimeSession.
func (s *realtimeSession) Settled() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled
}

// settle closes settled when the state is the upstream's. Called with mu
// held.
func (s *realtimeSession) settle() {
	if !s.created || len(s.awaiting) > 0 {
		return
	}
	select {
	case <-s.settled:
	default:
		close(s.settled)
	}
}

// await records a relayed session.update. Called with mu held.
func (s *realtimeSession) await(eventID string) {
	select {
	case <-s.settled:
		s.settled = make(chan struct{})
	default:
	}
	s.awaiting = append(s.awaiting, eventID)
}

// ClientEvent implements adapters.RealtimeSession.
func (s *realtimeSession) ClientEvent(event []byte) ([]byte, adapters.RealtimeClientEvent, *adapters.Error) {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(event, &head) != nil {
		return event, adapters.RealtimeClientEvent{}, nil // the upstream answers it
	}
	switch head.Type {
	case "input_audio_buffer.append":
		state, ok := s.current()
		if !ok {
			return event, adapters.RealtimeClientEvent{AwaitState: true}, nil
		}
		var w struct {
			Audio string `json:"audio"`
		}
		_ = json.Unmarshal(event, &w)
		ms := state.millis(w.Audio)
		ev := adapters.RealtimeClientEvent{Adds: adapters.RealtimeInput{Audio: audioTokens(ms)}}
		if state.transcribing {
			ev.TranscribedMillis = ms
		}
		return event, ev, nil
	case "conversation.item.create":
		state, ok := s.current()
		if !ok {
			return event, adapters.RealtimeClientEvent{AwaitState: true}, nil
		}
		var w struct {
			Item json.RawMessage `json:"item"`
		}
		_ = json.Unmarshal(event, &w)
		in, ms := state.itemInput(w.Item)
		ev := adapters.RealtimeClientEvent{Adds: in}
		if state.transcribing {
			ev.TranscribedMillis = ms
		}
		return event, ev, nil
	case "session.update":
		out, err := s.sessionUpdate(event)
		var w struct {
			Session struct {
				Instructions json.RawMessage `json:"instructions"`
				Tools        json.RawMessage `json:"tools"`
			} `json:"session"`
		}
		_ = json.Unmarshal(event, &w)
		// what every response reads again, counted once: the next
		// response's usage then holds it
		ev := adapters.RealtimeClientEvent{Adds: adapters.RealtimeInput{Text: int64(len(w.Session.Instructions) + len(w.Session.Tools))}}
		return out, ev, err
	case "response.create":
		return s.capResponse(event), s.responseInput(event), nil
	}
	return event, adapters.RealtimeClientEvent{}, nil
}

// audioTokensPerSecond bounds the tokens a second of input audio is read
// as: OpenAI counts about 10.
const audioTokensPerSecond = 20

// audioTokens bounds the tokens millis of input audio are read as.
func audioTokens(millis int64) int64 {
	return (millis*audioTokensPerSecond + 999) / 1000
}

// itemInput bounds the tokens a conversation item is read as: its audio
// by its length, everything else a token a byte (no tokenizer makes more
// tokens than bytes); and the milliseconds of input audio it carries.
func (st realtimeState) itemInput(item json.RawMessage) (adapters.RealtimeInput, int64) {
	var w struct {
		Content []struct {
			Type  string `json:"type"`
			Audio string `json:"audio"`
		} `json:"content"`
	}
	_ = json.Unmarshal(item, &w)
	in := adapters.RealtimeInput{Text: int64(len(item))}
	var inputMillis int64
	for _, c := range w.Content {
		if c.Audio == "" {
			continue
		}
		ms := st.millis(c.Audio)
		in.Text -= int64(len(c.Audio))
		in.Audio += audioTokens(ms)
		if c.Type == "input_audio" {
			inputMillis += ms
		}
	}
	in.Text = max(in.Text, 0)
	return in, inputMillis
}

// responseInput is what a response.create's response reads besides the
// conversation: its instructions and tools, and its input items (each an
// item_reference, or an item read as itemInput reads it).
func (s *realtimeSession) responseInput(event []byte) adapters.RealtimeClientEvent {
	ev := adapters.RealtimeClientEvent{CreatesResponse: true}
	var w struct {
		Response struct {
			Instructions json.RawMessage   `json:"instructions"`
			Tools        json.RawMessage   `json:"tools"`
			Input        []json.RawMessage `json:"input"`
		} `json:"response"`
	}
	if json.Unmarshal(event, &w) != nil {
		return ev
	}
	r := w.Response
	ev.Reads.Text = int64(len(r.Instructions) + len(r.Tools))
	if r.Input == nil {
		return ev
	}
	ev.OwnInput = true
	state, settled := s.current()
	if !settled {
		state.bytesPerSecond = g711BytesPerSecond // the longest a byte of audio can last
	}
	for _, item := range r.Input {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(item, &head)
		if head.Type == "item_reference" {
			ev.References++
			continue
		}
		in, _ := state.itemInput(item)
		ev.Reads.Text += in.Text
		ev.Reads.Audio += in.Audio
	}
	return ev
}

// current is the upstream's state, false while it awaits an answer.
func (s *realtimeSession) current() (realtimeState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.created && len(s.awaiting) == 0
}

// millis is how long base64 audio in the session's input format lasts.
func (st realtimeState) millis(audio string) int64 {
	n := int64(base64.StdEncoding.DecodedLen(len(audio)))
	n -= int64(len(audio) - len(strings.TrimRight(audio, "=")))
	if n <= 0 {
		return 0
	}
	return (n*1000 + st.bytesPerSecond - 1) / st.bytesPerSecond
}

// realtimeSessionConfig is what billing reads of a session object, in a
// client's session.update or the upstream's session.created and
// session.updated.
type realtimeSessionConfig struct {
	BetaTranscription json.RawMessage `json:"input_audio_transcription"`
	BetaFormat        *string         `json:"input_audio_format"`
	Audio             *struct {
		Input *struct {
			Transcription json.RawMessage `json:"transcription"`
			Format        *struct {
				Type string `json:"type"`
				Rate int64  `json:"rate"`
			} `json:"format"`
		} `json:"input"`
	} `json:"audio"`
}

// transcription is the transcription member the object names, nil when
// it names none.
func (c *realtimeSessionConfig) transcription() json.RawMessage {
	if c.Audio != nil && c.Audio.Input != nil && c.Audio.Input.Transcription != nil {
		return c.Audio.Input.Transcription
	}
	return c.BetaTranscription
}

// apply is st with what the object names changed.
func (c *realtimeSessionConfig) apply(st realtimeState) realtimeState {
	if t := c.transcription(); t != nil {
		st.transcribing = !bytes.Equal(bytes.TrimSpace(t), []byte("null"))
	}
	switch {
	case c.BetaFormat != nil && *c.BetaFormat == "pcm16":
		st.bytesPerSecond = pcm16BytesPerSecond
	case c.BetaFormat != nil && strings.HasPrefix(*c.BetaFormat, "g711"):
		st.bytesPerSecond = g711BytesPerSecond
	case c.Audio != nil && c.Audio.Input != nil && c.Audio.Input.Format != nil:
		f := c.Audio.Input.Format
		st.bytesPerSecond = pcm16BytesPerSecond
		if f.Type == "audio/pcmu" || f.Type == "audio/pcma" {
			st.bytesPerSecond = g711BytesPerSecond
		} else if f.Rate > 0 {
			st.bytesPerSecond = 2 * f.Rate
		}
	}
	return st
}

// sessionUpdate refuses transcription the model has no price for, lowers
// an output cap above the limit ("inf" included), and names the event
// (when the client did not) so that the upstream's answer is told apart:
// the session's state changes when the upstream accepts it.
func (s *realtimeSession) sessionUpdate(event []byte) ([]byte, *adapters.Error) {
	sess, found, err := adapters.TopLevelMember(event, "session")
	if err != nil || !found || !bytes.HasPrefix(sess, []byte("{")) {
		return s.awaitAnswer(event) // the upstream refuses it
	}
	var w realtimeSessionConfig
	if json.Unmarshal(sess, &w) != nil {
		return s.awaitAnswer(event)
	}
	if t := w.transcription(); t != nil && !bytes.Equal(bytes.TrimSpace(t), []byte("null")) && !s.limits.Transcription {
		field := "audio.input.transcription"
		if s.beta {
			field = "input_audio_transcription"
		}
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "transcription_not_priced",
			Message: "this gateway has no price for transcribing this model's input audio, so it cannot turn transcription on: leave session." + field + " unset, or ask the operator to set audio_second in the model's price"}
	}
	if capped, changed := s.capped(sess, ""); changed {
		if out, err := adapters.SetFields(event, adapters.Field{Key: "session", Value: json.RawMessage(capped)}); err == nil {
			event = out
		}
	}
	return s.awaitAnswer(event)
}

// awaitAnswer records a session.update relayed, naming it when the client
// did not.
func (s *realtimeSession) awaitAnswer(event []byte) ([]byte, *adapters.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var head struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(event, &head) != nil {
		return event, nil // no JSON object: the upstream's error names no event
	}
	if head.EventID == "" || head.EventID == setupEventID {
		// (the setup's id is the gateway's: its answer ends the session)
		s.updates++
		head.EventID = "event_gateway_update_" + strconv.Itoa(s.updates)
		out, err := adapters.SetFields(event, adapters.Field{Key: "event_id", Value: head.EventID})
		if err != nil {
			return event, nil
		}
		event = out
	}
	s.await(head.EventID)
	return event, nil
}

// capResponse gives a response.create the session's output cap as its
// own, or lowers the one it asked for to the limit.
func (s *realtimeSession) capResponse(event []byte) []byte {
	resp, found, err := adapters.TopLevelMember(event, "response")
	if err != nil {
		return event
	}
	if !found || !bytes.HasPrefix(resp, []byte("{")) {
		resp = []byte("{}")
	}
	// a response's own cap is max_output_tokens in both interfaces (the
	// beta names only the session's max_response_output_tokens apart)
	capped, changed := s.capped(resp, "max_output_tokens")
	if !changed {
		return event
	}
	out, err := adapters.SetFields(event, adapters.Field{Key: "response", Value: json.RawMessage(capped)})
	if err != nil {
		return event
	}
	return out
}

// capped lowers either interface's output cap in obj to the limit where it
// is above it or not a number ("inf"), and sets the key missing to the
// limit when obj has no cap at all ("" sets none).
func (s *realtimeSession) capped(obj []byte, missing string) ([]byte, bool) {
	var fields []adapters.Field
	capped := false // obj names a cap of its own
	for _, key := range []string{"max_output_tokens", "max_response_output_tokens"} {
		v, found, err := adapters.TopLevelMember(obj, key)
		if err != nil {
			return obj, false
		}
		if !found {
			continue
		}
		capped = true
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err != nil || n > s.maxOutput {
			fields = append(fields, adapters.Field{Key: key, Value: s.maxOutput})
		}
	}
	if !capped && missing != "" {
		fields = append(fields, adapters.Field{Key: missing, Value: s.maxOutput})
	}
	if len(fields) == 0 {
		return obj, false
	}
	out, err := adapters.SetFields(obj, fields...)
	if err != nil {
		return obj, false
	}
	return out, true
}

// realtimeServerHead is what the server events billing reads have in
// common: the response's id and usage, an error's, the session's state.
type realtimeServerHead struct {
	Type     string `json:"type"`
	Response struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversation_id"`
		Usage          *struct {
			InputTokens       int64 `json:"input_tokens"`
			OutputTokens      int64 `json:"output_tokens"`
			InputTokenDetails struct {
				CachedTokens        int64 `json:"cached_tokens"`
				AudioTokens         int64 `json:"audio_tokens"`
				CachedTokensDetails struct {
					AudioTokens int64 `json:"audio_tokens"`
				} `json:"cached_tokens_details"`
			} `json:"input_token_details"`
			OutputTokenDetails struct {
				AudioTokens int64 `json:"audio_tokens"`
			} `json:"output_token_details"`
		} `json:"usage"`
	} `json:"response"`
	Session *realtimeSessionConfig `json:"session"`
	Error   *struct {
		Message string `json:"message"`
		EventID string `json:"event_id"`
	} `json:"error"`
}

var (
	responseDone    = []byte(`"response.done"`)
	responseCreated = []byte(`"response.created"`)
	sessionEvent    = []byte(`"session.`)
	errorEvent      = []byte(`"error"`)
)

// ServerEvent implements adapters.RealtimeSession: response.created opens
// a response, response.done ends it with its usage, session.created and
// session.updated are the session's state, and an error naming a
// session.update refuses it. Audio frames, the bulk of a session, are
// passed over by a byte search before any parse.
func (s *realtimeSession) ServerEvent(event []byte) adapters.RealtimeServerEvent {
	if !bytes.Contains(event, responseDone) && !bytes.Contains(event, responseCreated) &&
		!bytes.Contains(event, sessionEvent) && !bytes.Contains(event, errorEvent) {
		return adapters.RealtimeServerEvent{}
	}
	var w realtimeServerHead
	if json.Unmarshal(event, &w) != nil {
		return adapters.RealtimeServerEvent{}
	}
	switch w.Type {
	case "session.created", "session.updated":
		return s.sessionState(w.Type == "session.updated", w.Session)
	case "error":
		if w.Error != nil {
			return s.refused(w.Error.EventID, w.Error.Message)
		}
		return adapters.RealtimeServerEvent{}
	case "response.created":
		// GA names the conversation a response joins; null for one that
		// runs apart ("conversation": "none")
		return adapters.RealtimeServerEvent{Kind: adapters.RealtimeResponseStarted, ResponseID: w.Response.ID,
			InConversation: w.Response.ConversationID != ""}
	case "response.done":
	default:
		return adapters.RealtimeServerEvent{}
	}
	ev := adapters.RealtimeServerEvent{Kind: adapters.RealtimeResponseDone, ResponseID: w.Response.ID}
	if u := w.Response.Usage; u != nil {
		d := u.InputTokenDetails
		ev.Usage = adapters.Usage{
			PromptTokens:          u.InputTokens,
			CachedTokens:          d.CachedTokens,
			AudioPromptTokens:     max(d.AudioTokens-d.CachedTokensDetails.AudioTokens, 0),
			CompletionTokens:      u.OutputTokens,
			AudioCompletionTokens: u.OutputTokenDetails.AudioTokens,
		}
	}
	return ev
}

// sessionState takes the session's state from the upstream's
// session.created or session.updated; an update answers the oldest
// session.update awaited.
func (s *realtimeSession) sessionState(updated bool, cfg *realtimeSessionConfig) adapters.RealtimeServerEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg != nil {
		s.state = cfg.apply(s.state)
	}
	var ev adapters.RealtimeServerEvent
	if !updated {
		s.created = true
	} else if len(s.awaiting) > 0 {
		if s.awaiting[0] == setupEventID {
			ev.Kind = adapters.RealtimeSetupDone
		}
		s.awaiting = s.awaiting[1:]
	}
	s.settle()
	return ev
}

// refused reads an error event: one naming a session.update awaited
// refuses it, and the state stays as it was.
func (s *realtimeSession) refused(eventID, message string) adapters.RealtimeServerEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.awaiting, eventID)
	if eventID == "" || i < 0 {
		return adapters.RealtimeServerEvent{}
	}
	s.awaiting = slices.Delete(s.awaiting, i, i+1)
	s.settle()
	if eventID == setupEventID {
		return adapters.RealtimeServerEvent{Kind: adapters.RealtimeSetupFailed, Message: message}
	}
	return adapters.RealtimeServerEvent{}
}

// Cancel implements adapters.RealtimeSession.
func (s *realtimeSession) Cancel(responseID string) []byte {
	b, _ := json.Marshal(struct {
		Type       string `json:"type"`
		ResponseID string `json:"response_id,omitempty"`
	}{"response.cancel", responseID})
	return b
}
