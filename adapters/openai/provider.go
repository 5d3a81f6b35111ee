package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// endpoint is the upstream path of each operation.
var endpoint = map[adapters.Operation]string{
	adapters.OpChat:       "/v1/chat/completions",
	adapters.OpCompletion: "/v1/completions",
	adapters.OpEmbedding:  "/v1/embeddings",
	adapters.OpResponses:  "/v1/responses",
}

var includeUsage = json.RawMessage(`{"include_usage":true}`)

// NewRequest implements adapters.ChatProvider, adapters.RerankProvider
// and adapters.MediaProvider: the operation says which.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Op == adapters.OpRerank {
		return newRerankRequest(ctx, up, req)
	}
	if req.Media != nil {
		return newMediaRequest(ctx, up, req)
	}
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
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+path, body, req.Stream)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	return hr, nil
}

// passthroughBody forwards the client's bytes, changing only what the
// gateway must: the model name, and asking for usage in a stream so the
// request can be billed on real counts.
func passthroughBody(req *adapters.Request, model string) ([]byte, error) {
	return passthroughBodyWith(req, model, WireOptions{})
}

// passthroughBodyWith is passthroughBody for a compatible server's options.
func passthroughBodyWith(req *adapters.Request, model string, o WireOptions) ([]byte, error) {
	var fields []adapters.Field
	// embeddings may name the model in the path (/v1/engines/{model}/...),
	// so the body's model is always set to the one resolved and billed
	replace := model != req.Model || req.Op == adapters.OpEmbedding
	if replace {
		fields = append(fields, adapters.Field{Key: "model", Value: model})
	}
	// a Responses stream always ends with its usage
	if req.Stream && !req.IncludeUsage && req.Op != adapters.OpResponses && !o.NoStreamOptions {
		fields = append(fields, adapters.Field{Key: "stream_options", Value: includeUsage})
		replace = replace || bytes.Contains(req.Raw, []byte("stream_options"))
	}
	// the allowance the gateway reserved is the upstream's limit too
	if req.OutputAllowance > 0 {
		switch {
		case req.Op == adapters.OpResponses && req.Chat != nil && req.Chat.MaxTokens == nil:
			fields = append(fields, adapters.Field{Key: "max_output_tokens", Value: req.OutputAllowance})
			replace = replace || bytes.Contains(req.Raw, []byte("max_output_tokens"))
		case req.Op == adapters.OpChat && req.Chat != nil && req.Chat.MaxTokens == nil:
			key := "max_completion_tokens"
			if o.MaxTokens {
				key = "max_tokens"
			}
			fields = append(fields, adapters.Field{Key: key, Value: req.OutputAllowance})
			replace = replace || bytes.Contains(req.Raw, []byte(key))
		case req.Op == adapters.OpCompletion && req.Completion != nil && req.Completion.MaxTokens == nil:
			fields = append(fields, adapters.Field{Key: "max_tokens", Value: req.OutputAllowance})
			replace = replace || bytes.Contains(req.Raw, []byte("max_tokens"))
		}
	}
	if len(fields) == 0 {
		return req.Raw, nil
	}
	// a key spelled with escapes could be any of them: rewrite member by member
	if replace || bytes.Contains(req.Raw, []byte(`\u`)) {
		return adapters.SetFields(req.Raw, fields...)
	}
	return adapters.AppendFields(req.Raw, fields...)
}

// DecodeRerankResponse implements adapters.RerankProvider: the
// OpenAI-compatible rerank servers answer in the common shape.
func (Adapter) DecodeRerankResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	return adapters.DecodeRerankAnswer(req, body)
}

// DecodeResponse implements adapters.ChatProvider.
func (Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if req.Dialect == Name && req.Op == adapters.OpResponses {
		return decodeResponsesBody(body)
	}
	if req.Dialect == Name {
		u, err := passthroughUsage(body)
		if err != nil {
			return nil, err
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

// passthroughUsage reads the usage of an answer relayed as it is: only the
// top-level usage member is decoded, the rest skipped (a full decode of
// every answer was the gateway's largest cost per request); a body the
// skip cannot read goes through encoding/json, for its error.
func passthroughUsage(body []byte) (usageOnly, error) {
	var u usageOnly
	if raw, found, err := adapters.TopLevelMember(body, "usage"); err == nil {
		if !found || decodeUsage(raw, &u.Usage) || json.Unmarshal(raw, &u.Usage) == nil {
			return u, nil
		}
	}
	if err := json.Unmarshal(body, &u); err != nil {
		return u, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	return u, nil
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
		if r := m.reasoning(); r != "" {
			resp.Message.Parts = append(resp.Message.Parts, adapters.Part{Type: adapters.PartThinking, Text: r})
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
		// a 429 insufficient_quota is the channel's account out of
		// credit, not the client sending too fast
		if e.Code == "insufficient_quota" || w.Error.Type == "insufficient_quota" {
			e.Fault = adapters.FaultChannel
		}
		return e
	}
	e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	return e
}

// NewStreamStep implements adapters.ChatProvider.
func (Adapter) NewStreamStep(req *adapters.Request) adapters.StreamStep {
	if req.Op == adapters.OpResponses {
		return responsesStep{}
	}
	return &streamStep{}
}

// streamStep reads chat and completion chunks, which end with data: [DONE].
type streamStep struct {
	tools   map[int]int // OpenAI tool_calls index -> neutral block index
	started bool
	// the blocks by tool call id, and the last one started, for servers
	// whose deltas carry no index or repeat one index for every call
	// (toolBlock)
	toolIDs   map[string]int
	blockIDs  map[int]string
	lastBlock int
	maxBlock  int
}

var (
	doneMarker = []byte("[DONE]")
	usageKey   = adapters.Key("usage")
	errorKey   = adapters.Key("error")
)

// end and error are read the same way in both modes. An error chunk is
// one with a top-level error member, wherever it stands and however the
// JSON is spaced (`{"error":{...}}`, `{ "error": {...} }`, or after the
// chunk's id as some compatible servers write it).
func (s *streamStep) head(data []byte) (adapters.StreamEnd, error) {
	if bytes.Equal(bytes.TrimSpace(data), doneMarker) {
		return adapters.StreamEndMarker, nil
	}
	// the search reads every chunk once; the member is parsed only on a hit
	if adapters.NamesMember(data, errorKey, `{"`) {
		return adapters.StreamGoesOn, chunkError(data)
	}
	return adapters.StreamGoesOn, nil
}

// chunkError is the error a chunk that names one carries, nil when its
// top-level error member says there is none.
func chunkError(data []byte) error {
	if v, found, err := adapters.TopLevelMember(data, "error"); err == nil && found && !noError(v) {
		return DecodeError(http.StatusBadGateway, data)
	}
	return nil
}

// noError reports an error member that says there is none ("", {}), as
// some servers write one in every chunk.
func noError(v []byte) bool {
	switch string(bytes.Join(bytes.Fields(v), nil)) {
	case `""`, `{}`:
		return true
	}
	return false
}

// Probe implements adapters.StreamStep. Only a chunk that names a usage
// object is parsed (most chunks carry none, or "usage":null).
func (s *streamStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	if bytes.Equal(bytes.TrimSpace(ev.Data), doneMarker) {
		return nil, adapters.StreamEndMarker, nil
	}
	// head's, finishEnd's and the usage's searches in one pass
	m := markChunk(ev.Data)
	if m.err {
		if err := chunkError(ev.Data); err != nil {
			return nil, adapters.StreamGoesOn, err
		}
	}
	end := m.end
	if !m.usage {
		return nil, end, nil
	}
	u, valid := chunkUsage(ev.Data)
	if valid && u == nil {
		u = choiceUsage(ev.Data)
	}
	if !valid || u == nil {
		return nil, end, nil
	}
	usage := usageFromWire(u)
	return &usage, adapters.StreamMayEnd, nil
}

// DeltaText implements adapters.StreamStep.
func (s *streamStep) DeltaText(data []byte) string {
	var c chatResponse
	if json.Unmarshal(data, &c) != nil {
		return ""
	}
	var text strings.Builder
	for _, ch := range c.Choices {
		text.WriteString(ch.Text)
		if ch.Delta == nil {
			continue
		}
		for _, p := range textParts(ch.Delta.Content) {
			text.WriteString(p.Text)
		}
		text.WriteString(ch.Delta.reasoning())
		for _, tc := range ch.Delta.ToolCalls {
			text.WriteString(tc.Function.Name)
			text.WriteString(tc.Function.Arguments)
		}
	}
	return text.String()
}

// Translate implements adapters.StreamStep.
func (s *streamStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	end, err := s.head(ev.Data)
	if err != nil || end != adapters.StreamGoesOn {
		return out, end, err
	}
	var c chatResponse
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		return out, end, fmt.Errorf("upstream sent an invalid stream chunk: %w", err)
	}
	if !s.started {
		s.started = true
		out = append(out, &adapters.StreamEvent{Type: adapters.EventStart, ID: c.ID, Model: c.Model})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 || ch.Delta == nil {
			continue
		}
		dl := ch.Delta
		if r := dl.reasoning(); r != "" {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: 0, Text: r})
		}
		for _, p := range textParts(dl.Content) {
			if p.Text != "" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: 0, Text: p.Text})
			}
		}
		for _, tc := range dl.ToolCalls {
			block, started := s.toolBlock(tc)
			if started {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: block, ToolCall: &adapters.ToolCall{ID: tc.ID, Name: tc.Function.Name}})
			}
			if tc.Function.Arguments != "" {
				out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: block, ToolCall: &adapters.ToolCall{Arguments: tc.Function.Arguments}})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: stopReason(*ch.FinishReason)})
			if finishedCleanly(*ch.FinishReason) {
				end = adapters.StreamMayEnd
			}
		}
	}
	if c.Usage == nil && len(c.Choices) > 0 {
		c.Usage = c.Choices[0].Usage
	}
	if c.Usage != nil {
		u := usageFromWire(c.Usage)
		out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u})
		end = adapters.StreamMayEnd
	}
	return out, end, nil
}
