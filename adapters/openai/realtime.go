package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
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
	beta := strings.Contains(client.Header.Get("Openai-Beta"), "realtime=v1")
	for _, p := range subprotocols(client.Header) {
		beta = beta || p == betaSubprotocol
	}
	if beta {
		h.Set("OpenAI-Beta", "realtime=v1")
	}
	return u.String(), h, nil
}

// realtimeDone is the part of a response.done event billing reads.
type realtimeDone struct {
	Type     string `json:"type"`
	Response struct {
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
}

var (
	responseDone    = []byte(`"response.done"`)
	responseCreated = []byte(`"response.created"`)
	responseCancel  = []byte(`{"type":"response.cancel"}`)
)

// RealtimeEvent implements adapters.RealtimeProvider: response.created
// opens a response, response.done ends it with its usage. Audio frames,
// the bulk of a session, are passed over by a byte search before any
// parse.
func (Adapter) RealtimeEvent(event []byte) (adapters.RealtimeEventKind, adapters.Usage) {
	switch {
	case bytes.Contains(event, responseDone):
	case bytes.Contains(event, responseCreated):
		var w struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(event, &w) == nil && w.Type == "response.created" {
			return adapters.RealtimeResponseStarted, adapters.Usage{}
		}
		return adapters.RealtimeOther, adapters.Usage{}
	default:
		return adapters.RealtimeOther, adapters.Usage{}
	}
	var w realtimeDone
	if json.Unmarshal(event, &w) != nil || w.Type != "response.done" {
		return adapters.RealtimeOther, adapters.Usage{}
	}
	u := w.Response.Usage
	if u == nil {
		return adapters.RealtimeResponseDone, adapters.Usage{}
	}
	d := u.InputTokenDetails
	return adapters.RealtimeResponseDone, adapters.Usage{
		PromptTokens:          u.InputTokens,
		CachedTokens:          d.CachedTokens,
		AudioPromptTokens:     max(d.AudioTokens-d.CachedTokensDetails.AudioTokens, 0),
		CompletionTokens:      u.OutputTokens,
		AudioCompletionTokens: u.OutputTokenDetails.AudioTokens,
	}
}

// RealtimeCancel implements adapters.RealtimeProvider.
func (Adapter) RealtimeCancel() []byte { return responseCancel }
