package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// endpoint is the upstream path of each operation.
var endpoint = map[adapters.Operation]string{
	adapters.OpChat:       "/v1/chat/completions",
	adapters.OpCompletion: "/v1/completions",
	adapters.OpEmbedding:  "/v1/embeddings",
}

var includeUsage = json.RawMessage(`{"include_usage":true}`)

// NewRequest implements adapters.Provider.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	path, ok := endpoint[req.Op]
	if !ok {
		return nil, adapters.Unsupported("channel %q (openai) does not serve %s requests", up.Channel, req.Op)
	}
	var body []byte
	var err error
	if req.Dialect == Name {
		body, err = passthroughBody(req, up.Model)
	} else {
		if req.Op != adapters.OpChat {
			return nil, adapters.Unsupported("%s requests cannot be translated to channel type openai", req.Op)
		}
		body, err = EncodeChatRequest(req, up.Model)
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
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}

// passthroughBody forwards the client's bytes, changing only what the
// gateway must: the model name, and asking for usage in a stream so the
// request can be billed on real counts.
func passthroughBody(req *adapters.Request, model string) ([]byte, error) {
	var fields []adapters.Field
	// embeddings may name the model in the path (/v1/engines/{model}/...),
	// so the body's model is always set to the one resolved and billed
	if model != req.Model || req.Op == adapters.OpEmbedding {
		fields = append(fields, adapters.Field{Key: "model", Value: model})
	}
	if req.Stream && !req.IncludeUsage {
		fields = append(fields, adapters.Field{Key: "stream_options", Value: includeUsage})
	}
	if len(fields) == 0 {
		return req.Raw, nil
	}
	return adapters.SetFields(req.Raw, fields...)
}

// DecodeResponse implements adapters.Provider.
func (Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if req.Dialect == Name {
		var u usageOnly
		if err := json.Unmarshal(body, &u); err != nil {
			return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
		}
		resp := &adapters.Response{Raw: body, Dialect: Name, Usage: usageFromWire(u.Usage), ContentType: "application/json"}
		if u.Usage == nil {
			// no usage: keep the answer's text so the relay can count it
			resp.Message = answerText(req.Op, body)
		}
		return resp, nil
	}
	if req.Op != adapters.OpChat {
		return nil, adapters.Unsupported("%s answers cannot be translated from channel type openai", req.Op)
	}
	return DecodeChatResponse(body)
}

// answerText pulls the generated text out of a chat or completion answer.
func answerText(op adapters.Operation, body []byte) adapters.Message {
	msg := adapters.Message{Role: adapters.RoleAssistant}
	switch op {
	case adapters.OpChat:
		if r, err := DecodeChatResponse(body); err == nil {
			msg = r.Message
		}
	case adapters.OpCompletion:
		var c completionResponse
		if json.Unmarshal(body, &c) == nil {
			for _, ch := range c.Choices {
				msg.Parts = append(msg.Parts, adapters.Part{Type: adapters.PartText, Text: ch.Text})
			}
		}
	}
	return msg
}

// DecodeChatResponse reads a chat.completion into neutral form.
func DecodeChatResponse(body []byte) (*adapters.Response, error) {
	var w chatResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{ID: w.ID, Model: w.Model, Created: w.Created, Usage: usageFromWire(w.Usage)}
	resp.Message.Role = adapters.RoleAssistant
	if len(w.Choices) > 0 && w.Choices[0].Message != nil {
		ch := w.Choices[0]
		m := ch.Message
		if m.Reasoning != "" {
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartThinking, Text: m.Reasoning})
		}
		for _, p := range textParts(m.Content) {
			if p.Text != "" {
				resp.Message.Parts = append(resp.Message.Parts, p)
			}
		}
		if m.Refusal != nil && *m.Refusal != "" {
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartText, Text: *m.Refusal})
			resp.StopReason = adapters.StopRefusal
		}
		for _, tc := range m.ToolCalls {
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		if ch.FinishReason != nil && resp.StopReason == "" {
			resp.StopReason = stopReason(*ch.FinishReason)
		}
	}
	return resp, nil
}

// DecodeError implements adapters.Provider.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return DecodeError(status, body)
}

// DecodeError reads OpenAI's error envelope; a body that is not one becomes
// a generic error for the status.
func DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) == nil && w.Error != nil && w.Error.Message != "" {
		e.Message = w.Error.Message
		if w.Error.Type != "" {
			e.Type = adapters.ErrorType(w.Error.Type)
		}
		if s, ok := w.Error.Code.(string); ok {
			e.Code = s
		}
		if w.Error.Param != nil {
			e.Param = *w.Error.Param
		}
		return e
	}
	e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	return e
}

// NewStreamDecoder implements adapters.Provider.
func (Adapter) NewStreamDecoder(req *adapters.Request, body io.Reader) adapters.StreamDecoder {
	return &streamDecoder{req: req, sse: adapters.NewSSEReader(body), passthrough: req.Dialect == Name}
}

type streamDecoder struct {
	req         *adapters.Request
	sse         *adapters.SSEReader
	passthrough bool
	// seen holds every passthrough chunk's data until the upstream reports
	// usage, so a stream without usage can still be counted; it is only
	// parsed in that case.
	seen     *[]byte // from seenPool
	sawUsage bool
	done     bool
	pending  []*adapters.StreamEvent
	tools    map[int]int // OpenAI tool_calls index -> neutral block index
	started  bool
	ev       adapters.StreamEvent
}

var (
	doneMarker = []byte("[DONE]")
	usageKey   = []byte(`"usage":{`)
	errorKey   = []byte(`"error":`)
)

func (d *streamDecoder) Next() (*adapters.StreamEvent, error) {
	if len(d.pending) > 0 {
		ev := d.pending[0]
		d.pending = d.pending[1:]
		return ev, nil
	}
	if d.done {
		return nil, io.EOF
	}
	for {
		sse, err := d.sse.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF // the upstream ended without [DONE]
			}
			return nil, err
		}
		data := sse.Data
		if bytes.Equal(data, doneMarker) {
			d.done = true
			return nil, io.EOF
		}
		if bytes.Contains(data, errorKey) && bytes.HasPrefix(bytes.TrimSpace(data), []byte(`{"error"`)) {
			return nil, DecodeError(http.StatusBadGateway, data)
		}
		if d.passthrough {
			d.ev = adapters.StreamEvent{Type: adapters.EventPassthrough, Raw: sse.Raw, Dialect: Name}
			if bytes.Contains(data, usageKey) {
				var u usageOnly
				if json.Unmarshal(data, &u) == nil && u.Usage != nil {
					usage := usageFromWire(u.Usage)
					d.ev.Type, d.ev.Usage, d.sawUsage = adapters.EventUsage, &usage, true
					d.releaseSeen()
				}
			}
			if !d.sawUsage {
				if d.seen == nil {
					d.seen = seenPool.Get().(*[]byte)
				}
				*d.seen = append(append(*d.seen, data...), '\n')
			}
			return &d.ev, nil
		}
		events, err := d.translate(data)
		if err != nil {
			return nil, err
		}
		if len(events) == 0 {
			continue
		}
		d.pending = events[1:]
		return events[0], nil
	}
}

// seenPool recycles the copies of passthrough chunks kept until usage
// arrives: nearly every stream reports usage, so they are almost always
// thrown away, and recycling spares the garbage collector.
var seenPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func (d *streamDecoder) releaseSeen() {
	if d.seen == nil {
		return
	}
	if cap(*d.seen) <= 256<<10 {
		*d.seen = (*d.seen)[:0]
		seenPool.Put(d.seen)
	}
	d.seen = nil
}

// PartialText implements adapters.PartialText: the completion text of the
// passthrough chunks seen, parsed only now that it is needed.
func (d *streamDecoder) PartialText() string {
	var text strings.Builder
	if d.seen == nil {
		return ""
	}
	defer d.releaseSeen()
	for _, line := range bytes.Split(*d.seen, []byte("\n")) {
		var c chatResponse
		if len(line) == 0 || json.Unmarshal(line, &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.Delta == nil {
				continue
			}
			for _, p := range textParts(ch.Delta.Content) {
				text.WriteString(p.Text)
			}
			text.WriteString(ch.Delta.Reasoning)
			for _, tc := range ch.Delta.ToolCalls {
				text.WriteString(tc.Function.Name)
				text.WriteString(tc.Function.Arguments)
			}
		}
	}
	return text.String()
}

// translate turns one chunk into neutral events for another dialect.
func (d *streamDecoder) translate(data []byte) ([]*adapters.StreamEvent, error) {
	var c chatResponse
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
	}
	var out []*adapters.StreamEvent
	if !d.started {
		d.started = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventStart, ID: c.ID, Model: c.Model})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 || ch.Delta == nil {
			continue
		}
		dl := ch.Delta
		if dl.Reasoning != "" {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: 0, Text: dl.Reasoning})
		}
		for _, p := range textParts(dl.Content) {
			if p.Text != "" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: 0, Text: p.Text})
			}
		}
		for _, tc := range dl.ToolCalls {
			i := 0
			if tc.Index != nil {
				i = *tc.Index
			}
			if d.tools == nil {
				d.tools = map[int]int{}
			}
			block, ok := d.tools[i]
			if !ok {
				block = 1 + i // block 0 is the text
				d.tools[i] = block
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: block, ToolCall: &adapters.ToolCall{ID: tc.ID, Name: tc.Function.Name}})
			}
			if tc.Function.Arguments != "" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: block, ToolCall: &adapters.ToolCall{Arguments: tc.Function.Arguments}})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: stopReason(*ch.FinishReason)})
		}
	}
	if c.Usage != nil {
		u := usageFromWire(c.Usage)
		d.sawUsage = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u})
	}
	return out, nil
}

// Pending implements adapters.Pending.
func (d *streamDecoder) Pending() bool { return len(d.pending) > 0 || d.sse.Buffered() }

// Release implements adapters.Releaser.
func (d *streamDecoder) Release() { d.sse.Release() }
