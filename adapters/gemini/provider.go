package gemini

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// NewRequest implements adapters.ChatProvider and adapters.MediaProvider:
// the operation says which.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Media != nil {
		return newImageRequest(ctx, up, req)
	}
	var method string
	switch req.Op {
	case adapters.OpChat, adapters.OpResponses:
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
	case req.Dialect == Name && req.Op == adapters.OpChat && req.OutputAllowance > 0 && (req.Chat == nil || req.Chat.MaxTokens == nil):
		// the model is in the URL; the allowance the gateway reserved
		// becomes the upstream's limit
		body, err = setMaxOutput(req.Raw, req.OutputAllowance)
	case req.Dialect == Name:
		body = req.Raw // the model is in the URL
	case req.Chat == nil:
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type gemini", req.Op)
	case req.Translatable() != nil:
		return nil, req.Translatable()
	case req.Op == adapters.OpCountTokens:
		body, err = EncodeCountTokensRequest(ctx, req, model)
	default:
		body, err = EncodeRequest(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	u := strings.TrimRight(up.BaseURL, "/") + "/v1beta/models/" + url.PathEscape(model) + ":" + method
	if req.Stream && req.Op.Conversation() {
		u += "?alt=sse"
	}
	hr, err := adapters.NewJSONRequest(ctx, u, body, req.Stream)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("X-Goog-Api-Key", up.Key)
	}
	return hr, nil
}

// setMaxOutput sets generationConfig.maxOutputTokens in a passthrough
// body, keeping every other byte.
func setMaxOutput(raw []byte, n int64) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, adapters.BadRequest("the request body is not a JSON object")
	}
	key := "generationConfig"
	if _, ok := top[key]; !ok {
		if _, ok := top["generation_config"]; ok {
			key = "generation_config"
		}
	}
	gc := top[key]
	if len(bytes.TrimSpace(gc)) == 0 || bytes.Equal(bytes.TrimSpace(gc), []byte("null")) {
		gc = json.RawMessage("{}")
	}
	gc, err := adapters.SetFields(gc, adapters.Field{Key: "maxOutputTokens", Value: n})
	if err != nil {
		return nil, err
	}
	return adapters.SetFields(raw, adapters.Field{Key: key, Value: json.RawMessage(gc)})
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

// DecodeResponse implements adapters.ChatProvider.
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
	case adapters.OpChat, adapters.OpResponses:
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
		// Gemini refuses a bad or expired key with a 400 whose reason is
		// in the details; a project without billing or quota says so the
		// same way: the channel's fault, not the request's
		if bytes.Contains(d.Details, []byte("API_KEY_INVALID")) || bytes.Contains(d.Details, []byte("API_KEY_EXPIRED")) ||
			bytes.Contains(d.Details, []byte("BILLING_DISABLED")) || bytes.Contains(d.Details, []byte("CONSUMER_SUSPENDED")) {
			e.Type, e.Fault = adapters.ErrAuthentication, adapters.FaultChannel
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

// NewStreamStep implements adapters.ChatProvider.
func (Adapter) NewStreamStep(*adapters.Request) adapters.StreamStep { return &streamStep{} }

// streamStep reads alt=sse chunks. Gemini has no end marker: a chunk with a
// finish reason, then the end of the body, is the normal end; a body that
// ends before one was cut off. Every chunk may repeat the usage so far.
type streamStep struct {
	finished    bool
	started     bool
	kind        string // kind of the open block: text, thought, tool
	index, next int
	sawCall     bool
	usage       *adapters.Usage
	usageSent   bool // the usage was given after the finish
	ids         callIDs
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

// Probe implements adapters.StreamStep.
func (s *streamStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return nil, adapters.StreamGoesOn, nil
	}
	var h chunkHead
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, adapters.StreamGoesOn, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
	}
	if h.Error != nil {
		return nil, adapters.StreamGoesOn, streamError(h.Error)
	}
	for _, c := range h.Candidates {
		if c.FinishReason != "" {
			s.finished = true
		}
	}
	if h.PromptFeedback != nil && h.PromptFeedback.BlockReason != "" {
		s.finished = true
	}
	if h.UsageMetadata == nil {
		return nil, s.end(), nil
	}
	u := usageFromWire(h.UsageMetadata)
	s.usage = &u
	if !s.finished && u.CompletionTokens == 0 {
		// while Gemini thinks its chunks count the prompt only, not the
		// thoughts they carry: kept for UsageSoFar, and the chunks stay
		// with the decoder, to be counted if the stream is cut
		return nil, s.end(), nil
	}
	// the output so far (hidden thoughts included, which no chunk's text
	// shows): a stream cut after it is billed at least that
	return &u, s.end(), nil
}

// UsageSoFar implements adapters.UsageSoFar: the usage the last chunk
// reported. Before the finish it counts the output up to that chunk,
// hidden thoughts included, or (while Gemini thinks) the prompt alone;
// the relay bills the larger of it and its own count of the text relayed.
func (s *streamStep) UsageSoFar() *adapters.Usage {
	if s.usage == nil {
		return nil
	}
	u := *s.usage
	return &u
}

func (s *streamStep) end() adapters.StreamEnd {
	if s.finished {
		return adapters.StreamMayEnd
	}
	return adapters.StreamGoesOn
}

// DeltaText implements adapters.StreamStep.
func (s *streamStep) DeltaText(data []byte) string {
	var c generateResponse
	if json.Unmarshal(data, &c) != nil {
		return ""
	}
	var text strings.Builder
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
	return text.String()
}

// Flush implements adapters.StreamFlusher: the usage, if the chunk with the
// finish reason did not carry it, goes out once the body has ended.
func (s *streamStep) Flush(out []*adapters.StreamEvent) []*adapters.StreamEvent {
	if s.usage != nil && !s.usageSent {
		s.usageSent = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: s.usage})
	}
	return out
}

// Translate implements adapters.StreamStep.
func (s *streamStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return out, s.end(), nil
	}
	out, err := s.translate(out, data)
	return out, s.end(), err
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
func (s *streamStep) block(kind string) int {
	if s.kind == kind && kind != "tool" {
		return s.index
	}
	s.kind, s.index = kind, s.next
	s.next++
	return s.index
}

// translate turns one chunk into neutral events for another dialect.
func (s *streamStep) translate(out []*adapters.StreamEvent, data []byte) ([]*adapters.StreamEvent, error) {
	var c struct {
		generateResponse
		Error *errorDetail `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return out, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
	}
	if c.Error != nil {
		return out, streamError(c.Error)
	}
	if !s.started {
		s.started = true
		s.ids.generate = callIDMaker(c.ResponseID)
		out = append(out, &adapters.StreamEvent{Type: adapters.EventStart, ID: c.ResponseID, Model: c.ModelVersion})
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				out = s.partEvents(out, p)
			}
		}
		if cand.FinishReason != "" && !s.finished {
			s.finished = true
			r := stopReason(cand.FinishReason)
			if r == adapters.StopEnd && s.sawCall {
				r = adapters.StopToolCalls
			}
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: r})
		}
	}
	if len(c.Candidates) == 0 && c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" && !s.finished {
		s.finished = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: adapters.StopContentFilter})
	}
	if c.UsageMetadata != nil {
		u := usageFromWire(c.UsageMetadata)
		s.usage = &u
		if s.finished {
			s.usageSent = true
			out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u})
		}
	}
	return out, nil
}

func (s *streamStep) partEvents(out []*adapters.StreamEvent, p part) []*adapters.StreamEvent {
	sig := signatureFromWire(p.ThoughtSignature)
	if p.Thought && p.Text != nil {
		if *p.Text == "" && sig == "" {
			return out
		}
		return append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: s.block("thought"), Text: *p.Text, Signature: sig})
	}
	if sig != "" {
		out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: s.block("thought"), Signature: sig})
	}
	switch {
	case p.Text != nil && *p.Text != "":
		out = append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: s.block("text"), Text: *p.Text})
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		i := s.block("tool")
		s.sawCall = true
		id := s.ids.call(fc.ID, fc.Name, 0, i)
		out = append(out,
			&adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: i, ToolCall: &adapters.ToolCall{ID: id, Name: fc.Name}},
			&adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: i, ToolCall: &adapters.ToolCall{Arguments: argsText(fc.Args)}})
	}
	return out
}

// UpstreamRequestID implements adapters.RequestIDReader: Google's front
// end names a request in x-goog-request-id where it does at all.
func (Adapter) UpstreamRequestID(h http.Header) string {
	if v := h.Get("X-Goog-Request-Id"); v != "" {
		return v
	}
	return h.Get("X-Request-Id")
}
