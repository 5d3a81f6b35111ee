package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// NewRequest implements adapters.ChatProvider.
func (a Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	var path string
	switch req.Op {
	case adapters.OpChat, adapters.OpResponses:
		path = "/v1/messages"
	case adapters.OpCountTokens:
		path = "/v1/messages/count_tokens"
	default:
		return nil, adapters.Unsupported("channel %q (anthropic) does not serve %s requests", up.Channel, req.Op)
	}
	passthrough := req.Dialect == Name
	var body []byte
	var err error
	switch {
	case passthrough && up.Model != req.Model:
		body, err = adapters.SetFields(req.Raw, adapters.Field{Key: "model", Value: up.Model})
	case passthrough:
		body = req.Raw
	case req.Chat == nil:
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type anthropic", req.Op)
	case req.Translatable() != nil:
		return nil, req.Translatable()
	case req.Op == adapters.OpCountTokens:
		body, err = EncodeCountTokensRequest(req, up.Model)
	default:
		body, err = encodeChat(req, up.Model, cmp.Or(a.MaxTokens, DefaultMaxTokens), a.AutoCache)
	}
	if err == nil && passthrough && a.AutoCache && req.Op != adapters.OpCountTokens {
		body, err = markCacheRaw(body)
	}
	if err != nil {
		return nil, err
	}
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+path, body, req.Stream)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("X-Api-Key", up.Key)
	}
	version := cmp.Or(a.Version, DefaultVersion)
	if passthrough && req.Header != nil {
		// the client's own version and betas: its body was written for them
		if v := req.Header.Get("Anthropic-Version"); v != "" {
			version = v
		}
		for _, b := range req.Header.Values("Anthropic-Beta") {
			hr.Header.Add("anthropic-beta", b)
		}
	}
	hr.Header.Set("Anthropic-Version", version)
	return hr, nil
}

// DecodeResponse implements adapters.ChatProvider.
func (Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if req.Dialect == Name {
		resp := &adapters.Response{Raw: body, Dialect: Name, ContentType: "application/json"}
		if req.Op == adapters.OpCountTokens {
			return resp, nil // counting is free
		}
		var u struct {
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal(body, &u); err != nil {
			return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
		}
		resp.Usage = usageFromWire(u.Usage)
		return resp, nil
	}
	switch req.Op {
	case adapters.OpCountTokens:
		var c countTokensResponse
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
		}
		// the count travels as prompt tokens; count_tokens is not billed
		return &adapters.Response{Usage: adapters.Usage{PromptTokens: c.InputTokens}}, nil
	case adapters.OpChat, adapters.OpResponses:
		return DecodeMessage(body)
	}
	return nil, adapters.Unsupported("%s answers cannot be translated from channel type anthropic", req.Op)
}

// DecodeMessage reads a Messages API answer into neutral form.
func DecodeMessage(body []byte) (*adapters.Response, error) {
	var w messageResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{ID: w.ID, Model: w.Model, Usage: usageFromWire(w.Usage)}
	resp.Message.Role = adapters.RoleAssistant
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartText, Text: b.Text})
			}
		case "thinking":
			p := adapters.Part{Type: adapters.PartThinking}
			if b.Thinking != nil {
				p.Text = *b.Thinking
			}
			if b.Signature != nil {
				p.Signature = adapters.TagSignature(Name, *b.Signature)
			}
			resp.Message.Parts = append(resp.Message.Parts, p)
		case "redacted_thinking":
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartThinking, Redacted: b.Data})
		case "tool_use":
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: b.ID, Name: b.Name, Arguments: inputText(b.Input)}})
		}
	}
	if w.StopReason != nil {
		resp.StopReason = stopReason(*w.StopReason)
	}
	return resp, nil
}

// DecodeError implements adapters.Provider.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return DecodeError(status, body)
}

// DecodeError reads Anthropic's error envelope; a body that is not one
// becomes a generic error for the status.
func DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) == nil && w.Error != nil && w.Error.Message != "" {
		e.Message = w.Error.Message
		e.Type = errorTypeFromWire(w.Error.Type, status)
		if w.Error.Type == "billing_error" {
			e.Fault = adapters.FaultChannel
		}
	} else {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	}
	// 402: the channel's account has no credit left
	if status == http.StatusPaymentRequired {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// statusOf is the HTTP status Anthropic gives each error type, for errors
// that arrive inside a stream.
var statusOf = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"overloaded_error":      http.StatusServiceUnavailable,
	"timeout_error":         http.StatusGatewayTimeout,
}

func streamError(data []byte) *adapters.Error {
	var w errorBody
	status := http.StatusBadGateway
	if json.Unmarshal(data, &w) == nil && w.Error != nil {
		if s, ok := statusOf[w.Error.Type]; ok {
			status = s
		}
		if w.Error.Message != "" {
			return &adapters.Error{Status: status, Type: errorTypeFromWire(w.Error.Type, status), Message: w.Error.Message}
		}
	}
	return &adapters.Error{Status: status, Type: adapters.ErrAPI, Message: "the upstream stream reported an error"}
}

// NewStreamStep implements adapters.ChatProvider.
func (Adapter) NewStreamStep(*adapters.Request) adapters.StreamStep {
	return &streamStep{kinds: map[int]string{}}
}

// streamStep reads Anthropic's named events, which end with message_stop.
// Usage comes in parts: input counts in message_start, the totals in
// message_delta.
type streamStep struct {
	totals usageTotals
	kinds  map[int]string // block index -> text, thinking, tool, for deltas
}

// name is the event's type: its event: line, or the type in its data.
func eventName(ev *adapters.SSEEvent) string {
	if ev.Name != "" {
		return ev.Name
	}
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(ev.Data, &t)
	return t.Type
}

// Probe implements adapters.StreamStep: message_delta carries the usage.
func (s *streamStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	switch eventName(ev) {
	case "error":
		return nil, adapters.StreamGoesOn, streamError(ev.Data)
	case "message_stop":
		return nil, adapters.StreamEnds, nil
	case "message_start":
		var e streamEvent
		if json.Unmarshal(ev.Data, &e) == nil && e.Message != nil {
			s.totals.merge(e.Message.Usage)
		}
	case "message_delta":
		var e streamEvent
		if json.Unmarshal(ev.Data, &e) == nil {
			s.totals.merge(e.Usage)
		}
		u := s.totals.neutral()
		return &u, adapters.StreamGoesOn, nil
	}
	return nil, adapters.StreamGoesOn, nil
}

// UsageSoFar implements adapters.UsageSoFar: message_start's counts before
// message_delta has come, so a stream cut in between is billed at least
// what Anthropic said it had taken in.
func (s *streamStep) UsageSoFar() *adapters.Usage {
	u := s.totals.neutral()
	if !u.Known() {
		return nil
	}
	return &u
}

// DeltaText implements adapters.StreamStep.
func (s *streamStep) DeltaText(data []byte) string {
	var e streamEvent
	if json.Unmarshal(data, &e) != nil || e.Delta == nil {
		return ""
	}
	return e.Delta.Text + e.Delta.Thinking + e.Delta.PartialJSON
}

// Translate implements adapters.StreamStep.
func (s *streamStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	name := eventName(ev)
	switch name {
	case "error":
		return out, adapters.StreamGoesOn, streamError(ev.Data)
	case "message_stop":
		return out, adapters.StreamEnds, nil
	}
	out, err := s.translate(out, name, ev.Data)
	return out, adapters.StreamGoesOn, err
}

// translate turns one event into neutral events for another dialect.
func (s *streamStep) translate(out []*adapters.StreamEvent, name string, data []byte) ([]*adapters.StreamEvent, error) {
	switch name {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
	default:
		return out, nil // ping, and new event types, which Anthropic asks clients to ignore
	}
	var e streamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return out, fmt.Errorf("upstream sent an invalid %s event: %w", name, err)
	}
	switch name {
	case "message_start":
		ev := &adapters.StreamEvent{Type: adapters.EventStart}
		if e.Message != nil {
			ev.ID, ev.Model = e.Message.ID, e.Message.Model
			s.totals.merge(e.Message.Usage)
		}
		return append(out, ev), nil
	case "content_block_start":
		b := e.ContentBlock
		if b == nil {
			return out, nil
		}
		switch b.Type {
		case "text":
			s.kinds[e.Index] = "text"
			if b.Text != "" {
				return append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: e.Index, Text: b.Text}), nil
			}
		case "thinking":
			s.kinds[e.Index] = "thinking"
			ev := &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: e.Index}
			if b.Thinking != nil {
				ev.Text = *b.Thinking
			}
			if b.Signature != nil {
				ev.Signature = adapters.TagSignature(Name, *b.Signature)
			}
			if ev.Text != "" || ev.Signature != "" {
				return append(out, ev), nil
			}
		case "tool_use":
			s.kinds[e.Index] = "tool"
			out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: e.Index, ToolCall: &adapters.ToolCall{ID: b.ID, Name: b.Name}})
			if in := inputText(b.Input); in != "{}" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: e.Index, ToolCall: &adapters.ToolCall{Arguments: in}})
			}
			return out, nil
		}
		return out, nil
	case "content_block_delta":
		dl := e.Delta
		if dl == nil {
			return out, nil
		}
		kind := s.kinds[e.Index]
		switch {
		case dl.Type == "text_delta" && kind == "text" && dl.Text != "":
			return append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: e.Index, Text: dl.Text}), nil
		case dl.Type == "thinking_delta" && kind == "thinking" && dl.Thinking != "":
			return append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: e.Index, Text: dl.Thinking}), nil
		case dl.Type == "signature_delta" && kind == "thinking" && dl.Signature != "":
			return append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: e.Index, Signature: adapters.TagSignature(Name, dl.Signature)}), nil
		case dl.Type == "input_json_delta" && kind == "tool" && dl.PartialJSON != "":
			return append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: e.Index, ToolCall: &adapters.ToolCall{Arguments: dl.PartialJSON}}), nil
		}
		return out, nil
	case "message_delta":
		s.totals.merge(e.Usage)
		if e.Delta != nil && e.Delta.StopReason != nil {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: stopReason(*e.Delta.StopReason)})
		}
		u := s.totals.neutral()
		return append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u}), nil
	}
	return out, nil
}

// UpstreamRequestID implements adapters.RequestIDReader: Anthropic names
// its id for a request in request-id.
func (Adapter) UpstreamRequestID(h http.Header) string { return h.Get("Request-Id") }
