package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// callIDMaker names the function calls of one answer that came without
// ids, so clients of other families can pair results with them. The names
// derive from the answer's responseId, which is unique, so the same answer
// always gets the same ids.
func callIDMaker(responseID string) func() string {
	var prefix string
	if responseID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		prefix = "call_" + hex.EncodeToString(b[:])
	} else {
		sum := sha256.Sum256([]byte(responseID))
		prefix = "call_" + hex.EncodeToString(sum[:8])
	}
	n := 0
	return func() string {
		n++
		return prefix + "_" + strconv.Itoa(n)
	}
}

// NewRequest implements adapters.Provider.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	var method string
	switch req.Op {
	case adapters.OpChat:
		method = "generateContent"
		if req.Stream {
			method = "streamGenerateContent"
		}
	case adapters.OpCountTokens:
		method = "countTokens"
	default:
		return nil, adapters.Unsupported("channel %q (gemini) does not serve %s requests", up.Channel, req.Op)
	}
	model := strings.TrimPrefix(up.Model, "models/")
	var body []byte
	var err error
	switch {
	case req.Dialect == Name && req.Op == adapters.OpCountTokens && model != req.Model:
		body, err = renameCountModel(req.Raw, model)
	case req.Dialect == Name:
		body = req.Raw // the model is in the URL
	case req.Chat == nil:
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type gemini", req.Op)
	case req.Op == adapters.OpCountTokens:
		body, err = EncodeCountTokensRequest(ctx, req, model)
	default:
		body, err = EncodeRequest(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	u := strings.TrimRight(up.BaseURL, "/") + "/v1beta/models/" + url.PathEscape(model) + ":" + method
	if req.Stream && req.Op == adapters.OpChat {
		u += "?alt=sse"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if up.Key != "" {
		hr.Header.Set("x-goog-api-key", up.Key)
	}
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}

// renameCountModel changes the model a countTokens body names inside
// generateContentRequest, which must match the one in the URL.
func renameCountModel(raw []byte, model string) ([]byte, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw, nil
	}
	for _, key := range []string{"generateContentRequest", "generate_content_request"} {
		inner, ok := top[key]
		if !ok || !bytes.Contains(inner, []byte(`"model"`)) {
			continue
		}
		renamed, err := adapters.SetFields(inner, adapters.Field{Key: "model", Value: "models/" + model})
		if err != nil {
			return nil, err
		}
		return adapters.SetFields(raw, adapters.Field{Key: key, Value: json.RawMessage(renamed)})
	}
	return raw, nil
}

// DecodeResponse implements adapters.Provider.
func (Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if req.Dialect == Name {
		resp := &adapters.Response{Raw: body, Dialect: Name, ContentType: "application/json"}
		if req.Op == adapters.OpCountTokens {
			return resp, nil // counting is free
		}
		var u struct {
			UsageMetadata *usageMetadata `json:"usageMetadata"`
		}
		if err := json.Unmarshal(body, &u); err != nil {
			return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
		}
		resp.Usage = usageFromWire(u.UsageMetadata)
		return resp, nil
	}
	switch req.Op {
	case adapters.OpCountTokens:
		var c countTokensResponse
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
		}
		// the count travels as prompt tokens; countTokens is not billed
		return &adapters.Response{Usage: adapters.Usage{PromptTokens: c.TotalTokens}}, nil
	case adapters.OpChat:
		return DecodeGenerateResponse(body)
	}
	return nil, adapters.Unsupported("%s answers cannot be translated from channel type gemini", req.Op)
}

// DecodeGenerateResponse reads a GenerateContentResponse into neutral form.
func DecodeGenerateResponse(body []byte) (*adapters.Response, error) {
	var w generateResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.Response{ID: w.ResponseID, Model: w.ModelVersion, Usage: usageFromWire(w.UsageMetadata)}
	resp.Message.Role = adapters.RoleAssistant
	for _, c := range w.Candidates {
		if c.Index != 0 {
			continue
		}
		if c.Content != nil {
			resp.Message.Parts = answerParts(c.Content.Parts, &callIDs{generate: callIDMaker(w.ResponseID)})
		}
		resp.StopReason = stopReason(c.FinishReason)
		if resp.StopReason == adapters.StopEnd && hasCall(resp.Message.Parts) {
			resp.StopReason = adapters.StopToolCalls
		}
		break
	}
	if len(w.Candidates) == 0 && w.PromptFeedback != nil && w.PromptFeedback.BlockReason != "" {
		resp.StopReason = adapters.StopContentFilter
	}
	return resp, nil
}

// answerParts reads an upstream's parts, skipping kinds the gateway does
// not translate rather than failing the answer.
func answerParts(parts []part, ids *callIDs) []adapters.Part {
	var out []adapters.Part
	for _, p := range parts {
		got, err := partsToNeutral([]part{p}, adapters.RoleAssistant, 0, ids)
		if err == nil {
			out = append(out, got...)
		}
	}
	return out
}

func hasCall(parts []adapters.Part) bool {
	for _, p := range parts {
		if p.Type == adapters.PartToolCall {
			return true
		}
	}
	return false
}

// DecodeError implements adapters.Provider.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return DecodeError(status, body)
}

// DecodeError reads Gemini's error envelope (alone, or first in an array);
// a body that is not one becomes a generic error for the status.
func DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	if d := errorDetailOf(body); d != nil && d.Message != "" {
		e.Message, e.Code = d.Message, d.Status
		e.Type = errorType(d.Status, status)
		if bytes.Contains(d.Details, []byte("API_KEY_INVALID")) {
			e.Type = adapters.ErrAuthentication
		}
		return e
	}
	e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	return e
}

func errorDetailOf(body []byte) *errorDetail {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var list []errorBody
		if json.Unmarshal(body, &list) == nil && len(list) > 0 {
			return list[0].Error
		}
		return nil
	}
	var w errorBody
	if json.Unmarshal(body, &w) != nil {
		return nil
	}
	return w.Error
}

// NewStreamDecoder implements adapters.Provider.
func (Adapter) NewStreamDecoder(req *adapters.Request, body io.Reader) adapters.StreamDecoder {
	return &streamDecoder{sse: adapters.NewSSEReader(body), passthrough: req.Dialect == Name}
}

// streamDecoder reads alt=sse chunks. Gemini has no end marker: a chunk
// with a finish reason, then the end of the body, is the normal end; a body
// that ends before one was cut off.
type streamDecoder struct {
	sse         *adapters.SSEReader
	passthrough bool
	finished    bool
	started     bool
	kind        string // kind of the open block: text, thought, tool
	index, next int
	sawCall     bool
	usage       *adapters.Usage
	usageSent   bool // the usage was given after the finish
	ids         callIDs
	pending     []*adapters.StreamEvent
	ev          adapters.StreamEvent
	// seen keeps passthrough chunks until one carries usage, so a stream
	// without any can still be counted; it is parsed only then.
	seen     []byte
	sawUsage bool
}

// chunkHead is what passthrough reads of a chunk: the end and the usage.
type chunkHead struct {
	Candidates []struct {
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	Error          *errorDetail    `json:"error"`
}

func (d *streamDecoder) Next() (*adapters.StreamEvent, error) {
	if len(d.pending) > 0 {
		ev := d.pending[0]
		d.pending = d.pending[1:]
		return ev, nil
	}
	for {
		sse, err := d.sse.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			if !d.finished {
				return nil, io.ErrUnexpectedEOF // cut off before a finish reason
			}
			if !d.passthrough && d.usage != nil && !d.usageSent {
				d.usageSent = true
				return &adapters.StreamEvent{Type: adapters.EventUsage, Usage: d.usage}, nil
			}
			return nil, io.EOF
		}
		data := bytes.TrimSpace(sse.Data)
		if len(data) == 0 {
			continue
		}
		if d.passthrough {
			var h chunkHead
			if err := json.Unmarshal(data, &h); err != nil {
				return nil, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
			}
			if h.Error != nil {
				return nil, streamError(h.Error)
			}
			d.ev = adapters.StreamEvent{Type: adapters.EventPassthrough, Raw: sse.Raw, Dialect: Name}
			for _, c := range h.Candidates {
				if c.FinishReason != "" {
					d.finished = true
				}
			}
			if h.PromptFeedback != nil && h.PromptFeedback.BlockReason != "" {
				d.finished = true
			}
			if h.UsageMetadata != nil {
				u := usageFromWire(h.UsageMetadata)
				d.ev.Type, d.ev.Usage = adapters.EventUsage, &u
				d.sawUsage, d.seen = true, nil
			} else if !d.sawUsage {
				d.seen = append(append(d.seen, data...), '\n')
			}
			return &d.ev, nil
		}
		events, err := d.translate(data)
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
// chunks seen when none carried usage.
func (d *streamDecoder) PartialText() string {
	var text strings.Builder
	for _, line := range bytes.Split(d.seen, []byte("\n")) {
		var c generateResponse
		if len(line) == 0 || json.Unmarshal(line, &c) != nil {
			continue
		}
		for _, cand := range c.Candidates {
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				if p.Text != nil {
					text.WriteString(*p.Text)
				}
				if p.FunctionCall != nil {
					text.WriteString(p.FunctionCall.Name)
					text.Write(p.FunctionCall.Args)
				}
			}
		}
	}
	return text.String()
}

func streamError(e *errorDetail) *adapters.Error {
	status := e.Code
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	msg := e.Message
	if msg == "" {
		msg = "the upstream stream reported an error"
	}
	return &adapters.Error{Status: status, Type: errorType(e.Status, status), Code: e.Status, Message: msg}
}

// block returns the neutral index for a part of the given kind: text and
// thoughts continue the open block of their kind, each call opens its own.
func (d *streamDecoder) block(kind string) int {
	if d.kind == kind && kind != "tool" {
		return d.index
	}
	d.kind, d.index = kind, d.next
	d.next++
	return d.index
}

// translate turns one chunk into neutral events for another dialect.
func (d *streamDecoder) translate(data []byte) ([]*adapters.StreamEvent, error) {
	var c struct {
		generateResponse
		Error *errorDetail `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
	}
	if c.Error != nil {
		return nil, streamError(c.Error)
	}
	var out []*adapters.StreamEvent
	if !d.started {
		d.started = true
		d.ids.generate = callIDMaker(c.ResponseID)
		out = append(out, &adapters.StreamEvent{Type: adapters.EventStart, ID: c.ResponseID, Model: c.ModelVersion})
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				out = d.partEvents(out, p)
			}
		}
		if cand.FinishReason != "" && !d.finished {
			d.finished = true
			r := stopReason(cand.FinishReason)
			if r == adapters.StopEnd && d.sawCall {
				r = adapters.StopToolCalls
			}
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: r})
		}
	}
	if len(c.Candidates) == 0 && c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" && !d.finished {
		d.finished = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: adapters.StopContentFilter})
	}
	if c.UsageMetadata != nil {
		u := usageFromWire(c.UsageMetadata)
		d.usage = &u
		if d.finished {
			d.usageSent = true
			out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u})
		}
	}
	return out, nil
}

func (d *streamDecoder) partEvents(out []*adapters.StreamEvent, p part) []*adapters.StreamEvent {
	sig := signatureFromWire(p.ThoughtSignature)
	if p.Thought && p.Text != nil {
		if *p.Text == "" && sig == "" {
			return out
		}
		return append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: d.block("thought"), Text: *p.Text, Signature: sig})
	}
	if sig != "" {
		out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: d.block("thought"), Signature: sig})
	}
	switch {
	case p.Text != nil && *p.Text != "":
		out = append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: d.block("text"), Text: *p.Text})
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		i := d.block("tool")
		d.sawCall = true
		id := d.ids.call(fc.ID, fc.Name, 0, i)
		out = append(out,
			&adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: i, ToolCall: &adapters.ToolCall{ID: id, Name: fc.Name}},
			&adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: i, ToolCall: &adapters.ToolCall{Arguments: argsText(fc.Args)}})
	}
	return out
}

// Pending implements adapters.Pending.
func (d *streamDecoder) Pending() bool { return len(d.pending) > 0 || d.sse.Buffered() }

// Release implements adapters.Releaser.
func (d *streamDecoder) Release() { d.sse.Release() }
