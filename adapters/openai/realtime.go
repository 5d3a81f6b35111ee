package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
		maxOutput: min(max(limits.MaxOutputTokens, 1), 4096), bytesPerSecond: pcm16BytesPerSecond}
}

// realtimeSession reads one session's events. The GA interface and the
// beta one name the output cap, the transcription and the audio format
// apart: max_output_tokens, audio.input.transcription and
// audio.input.format against max_response_output_tokens,
// input_audio_transcription and input_audio_format.
type realtimeSession struct {
	limits    adapters.RealtimeLimits
	beta      bool
	capKey    string
	maxOutput int64
	// setup: the answer to Setup is awaited (the server pump's)
	setup bool
	// transcribing and the input format's rate (the client pump's)
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
	s.setup = true
	sess := map[string]any{s.capKey: s.maxOutput}
	if !s.beta {
		sess["type"] = "realtime" // GA's session.update names the session type
	}
	b, _ := json.Marshal(map[string]any{"type": "session.update", "event_id": setupEventID, "session": sess})
	return b
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
		if !s.transcribing {
			break
		}
		var w struct {
			Audio string `json:"audio"`
		}
		_ = json.Unmarshal(event, &w)
		return event, adapters.RealtimeClientEvent{TranscribedMillis: s.millis(w.Audio)}, nil
	case "conversation.item.create":
		if !s.transcribing {
			break
		}
		var w struct {
			Item struct {
				Content []struct {
					Type  string `json:"type"`
					Audio string `json:"audio"`
				} `json:"content"`
			} `json:"item"`
		}
		_ = json.Unmarshal(event, &w)
		var ms int64
		for _, c := range w.Item.Content {
			if c.Type == "input_audio" {
				ms += s.millis(c.Audio)
			}
		}
		return event, adapters.RealtimeClientEvent{TranscribedMillis: ms}, nil
	case "session.update":
		out, err := s.sessionUpdate(event)
		return out, adapters.RealtimeClientEvent{}, err
	case "response.create":
		return s.capResponse(event), adapters.RealtimeClientEvent{CreatesResponse: true}, nil
	}
	return event, adapters.RealtimeClientEvent{}, nil
}

// millis is how long base64 audio in the session's input format lasts.
func (s *realtimeSession) millis(audio string) int64 {
	n := int64(base64.StdEncoding.DecodedLen(len(audio)))
	n -= int64(len(audio) - len(strings.TrimRight(audio, "=")))
	if n <= 0 {
		return 0
	}
	return (n*1000 + s.bytesPerSecond - 1) / s.bytesPerSecond
}

// sessionUpdate refuses transcription the model has no price for, lowers
// an output cap above the limit ("inf" included), and follows the
// transcription and the input audio format.
func (s *realtimeSession) sessionUpdate(event []byte) ([]byte, *adapters.Error) {
	sess, found, err := adapters.TopLevelMember(event, "session")
	if !found || err != nil || !bytes.HasPrefix(sess, []byte("{")) {
		return event, nil // the upstream answers it
	}
	var w struct {
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
	if json.Unmarshal(sess, &w) != nil {
		return event, nil
	}
	transcription := w.BetaTranscription
	if w.Audio != nil && w.Audio.Input != nil && w.Audio.Input.Transcription != nil {
		transcription = w.Audio.Input.Transcription
	}
	on := s.transcribing
	if transcription != nil {
		on = !bytes.Equal(bytes.TrimSpace(transcription), []byte("null"))
	}
	if on && !s.transcribing && !s.limits.Transcription {
		field := "audio.input.transcription"
		if s.beta {
			field = "input_audio_transcription"
		}
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "transcription_not_priced",
			Message: "this gateway has no price for transcribing this model's input audio, so it cannot turn transcription on: leave session." + field + " unset, or ask the operator to set audio_second in the model's price"}
	}
	s.transcribing = on
	switch {
	case w.BetaFormat != nil && *w.BetaFormat == "pcm16":
		s.bytesPerSecond = pcm16BytesPerSecond
	case w.BetaFormat != nil && strings.HasPrefix(*w.BetaFormat, "g711"):
		s.bytesPerSecond = g711BytesPerSecond
	case w.Audio != nil && w.Audio.Input != nil && w.Audio.Input.Format != nil:
		f := w.Audio.Input.Format
		s.bytesPerSecond = pcm16BytesPerSecond
		if f.Type == "audio/pcmu" || f.Type == "audio/pcma" {
			s.bytesPerSecond = g711BytesPerSecond
		} else if f.Rate > 0 {
			s.bytesPerSecond = 2 * f.Rate
		}
	}
	capped, changed := s.capped(sess, "")
	if !changed {
		return event, nil
	}
	out, err := adapters.SetFields(event, adapters.Field{Key: "session", Value: json.RawMessage(capped)})
	if err != nil {
		return event, nil
	}
	return out, nil
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
// common: the response's id and usage, an error's.
type realtimeServerHead struct {
	Type     string `json:"type"`
	Response struct {
		ID    string `json:"id"`
		Usage *struct {
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
	Error *struct {
		Message string `json:"message"`
		EventID string `json:"event_id"`
	} `json:"error"`
}

var (
	responseDone    = []byte(`"response.done"`)
	responseCreated = []byte(`"response.created"`)
)

// ServerEvent implements adapters.RealtimeSession: response.created opens
// a response, response.done ends it with its usage. Audio frames, the
// bulk of a session, are passed over by a byte search before any parse.
func (s *realtimeSession) ServerEvent(event []byte) adapters.RealtimeServerEvent {
	if s.setup {
		var w realtimeServerHead
		if json.Unmarshal(event, &w) == nil {
			switch {
			case w.Type == "session.updated":
				s.setup = false
				return adapters.RealtimeServerEvent{Kind: adapters.RealtimeSetupDone}
			case w.Type == "error" && w.Error != nil && w.Error.EventID == setupEventID:
				s.setup = false
				return adapters.RealtimeServerEvent{Kind: adapters.RealtimeSetupFailed, Message: w.Error.Message}
			}
		}
	}
	if !bytes.Contains(event, responseDone) && !bytes.Contains(event, responseCreated) {
		return adapters.RealtimeServerEvent{}
	}
	var w realtimeServerHead
	if json.Unmarshal(event, &w) != nil {
		return adapters.RealtimeServerEvent{}
	}
	switch w.Type {
	case "response.created":
		return adapters.RealtimeServerEvent{Kind: adapters.RealtimeResponseStarted, ResponseID: w.Response.ID}
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

// Cancel implements adapters.RealtimeSession.
func (s *realtimeSession) Cancel(responseID string) []byte {
	b, _ := json.Marshal(struct {
		Type       string `json:"type"`
		ResponseID string `json:"response_id,omitempty"`
	}{"response.cancel", responseID})
	return b
}
