package anthropic

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// NewRequest implements adapters.Provider.
func (a Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	var path string
	switch req.Op {
	case adapters.OpChat:
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
	case req.Op == adapters.OpCountTokens:
		body, err = EncodeCountTokensRequest(req, up.Model)
	default:
		body, err = encodeChat(req, up.Model, cmp.Or(a.MaxTokens, DefaultMaxTokens))
	}
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(up.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if up.Key != "" {
		hr.Header.Set("x-api-key", up.Key)
	}
	version := cmp.Or(a.Version, DefaultVersion)
	if passthrough && req.Header != nil {
		// the client's own version and betas: its body was written for them
		if v := req.Header.Get("anthropic-version"); v != "" {
			version = v
		}
		for _, b := range req.Header.Values("anthropic-beta") {
			hr.Header.Add("anthropic-beta", b)
		}
	}
	hr.Header.Set("anthropic-version", version)
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}

// DecodeResponse implements adapters.Provider.
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
	case adapters.OpChat:
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
		return e
	}
	e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
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

// NewStreamDecoder implements adapters.Provider.
func (Adapter) NewStreamDecoder(req *adapters.Request, body io.Reader) adapters.StreamDecoder {
	return &streamDecoder{sse: adapters.NewSSEReader(body), passthrough: req.Dialect == Name, kinds: map[int]string{}}
}

// streamDecoder reads Anthropic's named events. In passthrough every frame
// comes back as an event carrying it, so the client gets every byte, and
// message_delta carries the usage; otherwise the frames become neutral
// events.
type streamDecoder struct {
	sse         *adapters.SSEReader
	passthrough bool
	totals      usageTotals
	done        bool
	kinds       map[int]string // block index -> text, thinking, tool, for deltas
	pending     []*adapters.StreamEvent
	ev          adapters.StreamEvent
	// seen keeps passthrough deltas until message_delta brings the usage,
	// so a stream cut off before it can still be counted; it is parsed only
	// then.
	seen []byte
}

func (d *streamDecoder) Next() (*adapters.StreamEvent, error) {
	if len(d.pending) > 0 {
		ev := d.pending[0]
		d.pending = d.pending[1:]
		return ev, nil
	}
	for {
		if d.done {
			return nil, io.EOF
		}
		sse, err := d.sse.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF // the upstream ended without message_stop
			}
			return nil, err
		}
		name := sse.Name
		if name == "" {
			var t struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(sse.Data, &t)
			name = t.Type
		}
		if name == "error" {
			return nil, streamError(sse.Data)
		}
		if d.passthrough {
			d.ev = adapters.StreamEvent{Type: adapters.EventPassthrough, Raw: sse.Raw, Dialect: Name}
			switch name {
			case "message_start", "message_delta":
				var e streamEvent
				if json.Unmarshal(sse.Data, &e) == nil {
					if e.Message != nil {
						d.totals.merge(e.Message.Usage)
					}
					d.totals.merge(e.Usage)
				}
				if name == "message_delta" {
					u := d.totals.neutral()
					d.ev.Type, d.ev.Usage = adapters.EventUsage, &u
					d.seen = nil
				}
			case "content_block_delta":
				d.seen = append(append(d.seen, sse.Data...), '\n')
			case "message_stop":
				d.done = true
			}
			return &d.ev, nil
		}
		events, err := d.translate(name, sse.Data)
		if err != nil {
			return nil, err
		}
		if len(events) > 0 {
			d.pending = events[1:]
			return events[0], nil
		}
	}
}

// PartialText implements adapters.PartialText: the text of the passthrough
// deltas seen before the stream ended without its usage.
func (d *streamDecoder) PartialText() string {
	var text strings.Builder
	for _, line := range bytes.Split(d.seen, []byte("\n")) {
		var e streamEvent
		if len(line) == 0 || json.Unmarshal(line, &e) != nil || e.Delta == nil {
			continue
		}
		text.WriteString(e.Delta.Text)
		text.WriteString(e.Delta.Thinking)
		text.WriteString(e.Delta.PartialJSON)
	}
	return text.String()
}

// translate turns one event into neutral events for another dialect.
func (d *streamDecoder) translate(name string, data []byte) ([]*adapters.StreamEvent, error) {
	switch name {
	case "ping":
		return nil, nil
	case "message_stop":
		d.done = true
		return nil, nil
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
	default:
		return nil, nil // new event types are ignored, as Anthropic asks
	}
	var e streamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("upstream sent an invalid %s event: %w", name, err)
	}
	switch name {
	case "message_start":
		ev := &adapters.StreamEvent{Type: adapters.EventStart}
		if e.Message != nil {
			ev.ID, ev.Model = e.Message.ID, e.Message.Model
			d.totals.merge(e.Message.Usage)
		}
		return []*adapters.StreamEvent{ev}, nil
	case "content_block_start":
		b := e.ContentBlock
		if b == nil {
			return nil, nil
		}
		switch b.Type {
		case "text":
			d.kinds[e.Index] = "text"
			if b.Text != "" {
				return []*adapters.StreamEvent{{Type: adapters.EventTextDelta, Index: e.Index, Text: b.Text}}, nil
			}
		case "thinking":
			d.kinds[e.Index] = "thinking"
			ev := &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: e.Index}
			if b.Thinking != nil {
				ev.Text = *b.Thinking
			}
			if b.Signature != nil {
				ev.Signature = adapters.TagSignature(Name, *b.Signature)
			}
			if ev.Text != "" || ev.Signature != "" {
				return []*adapters.StreamEvent{ev}, nil
			}
		case "tool_use":
			d.kinds[e.Index] = "tool"
			out := []*adapters.StreamEvent{{Type: adapters.EventToolCallStart, Index: e.Index, ToolCall: &adapters.ToolCall{ID: b.ID, Name: b.Name}}}
			if in := inputText(b.Input); in != "{}" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: e.Index, ToolCall: &adapters.ToolCall{Arguments: in}})
			}
			return out, nil
		}
		return nil, nil
	case "content_block_delta":
		dl := e.Delta
		if dl == nil {
			return nil, nil
		}
		kind := d.kinds[e.Index]
		switch {
		case dl.Type == "text_delta" && kind == "text" && dl.Text != "":
			return []*adapters.StreamEvent{{Type: adapters.EventTextDelta, Index: e.Index, Text: dl.Text}}, nil
		case dl.Type == "thinking_delta" && kind == "thinking" && dl.Thinking != "":
			return []*adapters.StreamEvent{{Type: adapters.EventThinkingDelta, Index: e.Index, Text: dl.Thinking}}, nil
		case dl.Type == "signature_delta" && kind == "thinking" && dl.Signature != "":
			return []*adapters.StreamEvent{{Type: adapters.EventThinkingDelta, Index: e.Index, Signature: adapters.TagSignature(Name, dl.Signature)}}, nil
		case dl.Type == "input_json_delta" && kind == "tool" && dl.PartialJSON != "":
			return []*adapters.StreamEvent{{Type: adapters.EventToolCallDelta, Index: e.Index, ToolCall: &adapters.ToolCall{Arguments: dl.PartialJSON}}}, nil
		}
		return nil, nil
	case "message_delta":
		d.totals.merge(e.Usage)
		var out []*adapters.StreamEvent
		if e.Delta != nil && e.Delta.StopReason != nil {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: stopReason(*e.Delta.StopReason)})
		}
		u := d.totals.neutral()
		return append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u}), nil
	}
	return nil, nil
}

// Pending implements adapters.Pending.
func (d *streamDecoder) Pending() bool { return len(d.pending) > 0 || d.sse.Buffered() }

// Release implements adapters.Releaser.
func (d *streamDecoder) Release() { d.sse.Release() }
