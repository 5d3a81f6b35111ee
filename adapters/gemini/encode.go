package gemini

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// EncodeResponse implements adapters.Dialect.
func (a Adapter) EncodeResponse(req *adapters.Request, resp *adapters.Response) ([]byte, error) {
	if resp.Dialect == Name && resp.Raw != nil {
		return resp.Raw, nil
	}
	switch req.Op {
	case adapters.OpCountTokens:
		return a.EncodeTokenCount(resp.Usage.PromptTokens), nil
	case adapters.OpChat:
	default:
		return nil, adapters.Unsupported("this method cannot be answered by a channel of another family")
	}
	var parts []part
	pending := ""
	for _, p := range resp.Message.Parts {
		switch p.Type {
		case adapters.PartThinking:
			sig := signatureToClient(p.Signature)
			if p.Text == "" {
				pending = sig
				continue
			}
			text := p.Text
			parts = append(parts, part{Text: &text, Thought: true, ThoughtSignature: sig})
		case adapters.PartText:
			if p.Text == "" {
				continue
			}
			text := p.Text
			parts = append(parts, part{Text: &text, ThoughtSignature: pending})
			pending = ""
		case adapters.PartToolCall:
			args, err := argsObject(p.ToolCall.Arguments)
			if err != nil {
				args = json.RawMessage("{}") // a cut-off call; the finish reason says so
			}
			parts = append(parts, part{FunctionCall: &functionCall{ID: p.ToolCall.ID, Name: p.ToolCall.Name, Args: args}, ThoughtSignature: pending})
			pending = ""
		}
	}
	if pending != "" {
		empty := ""
		parts = append(parts, part{Text: &empty, ThoughtSignature: pending})
	}
	if parts == nil {
		parts = []part{}
	}
	out := generateResponse{
		Candidates:    []candidate{{Content: &content{Role: "model", Parts: parts}, FinishReason: finishReasonToWire(resp.StopReason)}},
		UsageMetadata: usageToWire(resp.Usage),
		ModelVersion:  orModel(resp.Model, req.Model),
		ResponseID:    resp.ID,
	}
	return json.Marshal(out)
}

func orModel(m, fallback string) string {
	if m != "" {
		return m
	}
	return fallback
}

func finishReasonToWire(r adapters.StopReason) string {
	switch r {
	case adapters.StopLength:
		return "MAX_TOKENS"
	case adapters.StopContentFilter, adapters.StopRefusal:
		return "SAFETY"
	}
	return "STOP" // Gemini ends a turn of function calls with STOP too
}

func stopReason(f string) adapters.StopReason {
	switch f {
	case "MAX_TOKENS":
		return adapters.StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return adapters.StopContentFilter
	}
	return adapters.StopEnd // STOP, MALFORMED_FUNCTION_CALL, LANGUAGE, OTHER, ...
}

func usageToWire(u adapters.Usage) *usageMetadata {
	return &usageMetadata{
		PromptTokenCount:        u.PromptTokens,
		CandidatesTokenCount:    max(u.CompletionTokens-u.ReasoningTokens, 0),
		ThoughtsTokenCount:      u.ReasoningTokens,
		CachedContentTokenCount: u.CachedTokens,
		TotalTokenCount:         u.PromptTokens + u.CompletionTokens,
	}
}

// usageFromWire counts as OpenAI does: prompt tokens include cached and
// tool-use prompt tokens, completion tokens include thoughts.
func usageFromWire(w *usageMetadata) adapters.Usage {
	if w == nil {
		return adapters.Usage{}
	}
	return adapters.Usage{
		PromptTokens:     w.PromptTokenCount + w.ToolUsePromptTokenCount,
		CompletionTokens: w.CandidatesTokenCount + w.ThoughtsTokenCount,
		CachedTokens:     w.CachedContentTokenCount,
		ReasoningTokens:  w.ThoughtsTokenCount,
	}
}

// EncodeError implements adapters.Dialect: {"error":{"code","message","status"}}.
func (Adapter) EncodeError(e *adapters.Error) []byte {
	return encodeError(e)
}

func encodeError(e *adapters.Error) []byte {
	code := e.Status
	if code == 0 {
		code = http.StatusInternalServerError
	}
	b, _ := json.Marshal(errorBody{Error: &errorDetail{Code: code, Message: e.Message, Status: statusName(e)}})
	return b
}

// statusName is the google.rpc status Gemini gives an HTTP status.
func statusName(e *adapters.Error) string {
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden, http.StatusPaymentRequired:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable, 529:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if e.Status >= 400 && e.Status < 500 {
		return "INVALID_ARGUMENT"
	}
	return "INTERNAL"
}

// errorType maps a google.rpc status to the neutral (OpenAI) vocabulary.
func errorType(status string, code int) adapters.ErrorType {
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return adapters.ErrInvalidRequest
	case "UNAUTHENTICATED":
		return adapters.ErrAuthentication
	case "PERMISSION_DENIED":
		return adapters.ErrPermission
	case "NOT_FOUND":
		return adapters.ErrNotFound
	case "RESOURCE_EXHAUSTED":
		return adapters.ErrRateLimit
	case "UNAVAILABLE":
		return adapters.ErrOverloaded
	case "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "ABORTED", "CANCELLED":
		return adapters.ErrAPI
	}
	return adapters.ErrorTypeForStatus(code)
}

// EncodeModels implements adapters.Dialect.
func (Adapter) EncodeModels(models []adapters.ModelInfo) []byte {
	list := modelList{Models: make([]modelObject, len(models))}
	for i, m := range models {
		list.Models[i] = modelToWire(m)
	}
	b, _ := json.Marshal(list)
	return b
}

// EncodeModel implements adapters.Dialect.
func (Adapter) EncodeModel(m adapters.ModelInfo) []byte {
	b, _ := json.Marshal(modelToWire(m))
	return b
}

func modelToWire(m adapters.ModelInfo) modelObject {
	return modelObject{
		Name:                       "models/" + m.ID,
		BaseModelID:                m.ID,
		DisplayName:                m.ID,
		SupportedGenerationMethods: []string{"generateContent", "streamGenerateContent", "countTokens"},
	}
}

// EncodeTokenCount implements adapters.TokenCountEncoder.
func (Adapter) EncodeTokenCount(n int64) []byte {
	b, _ := json.Marshal(countTokensResponse{TotalTokens: n})
	return b
}

// NewStreamEncoder implements adapters.Dialect.
func (Adapter) NewStreamEncoder(req *adapters.Request) adapters.StreamEncoder {
	return &streamEncoder{req: req}
}

// streamEncoder writes alt=sse chunks: bare data: lines, since the Gen AI
// SDKs drop any event that has an event: line. Gemini sends a function call
// whole, so argument deltas are gathered until the call's block ends; the
// finish reason waits for the usage, as the last chunk carries both.
type streamEncoder struct {
	req       *adapters.Request
	id, model string
	calls     []*pendingCall
	signature string // a thought signature waiting for the next part
	stop      *adapters.StopReason
	usage     *adapters.Usage
	done      bool
	// passthrough is set once the upstream's own chunks are written: they
	// hold its last chunk, so Finish adds nothing.
	passthrough bool
}

type pendingCall struct {
	index int
	call  adapters.ToolCall
	args  strings.Builder
}

func (s *streamEncoder) ContentType() string { return "text/event-stream" }

func (s *streamEncoder) Encode(dst []byte, ev *adapters.StreamEvent) []byte {
	if ev.Dialect == Name && ev.Raw != nil {
		s.passthrough = true
		return append(dst, ev.Raw...)
	}
	if s.done {
		return dst
	}
	switch ev.Type {
	case adapters.EventStart:
		s.id, s.model = ev.ID, ev.Model
	case adapters.EventTextDelta:
		if ev.Text == "" {
			return dst
		}
		dst = s.flushCalls(dst)
		text := ev.Text
		return s.chunk(dst, []part{s.sign(part{Text: &text})}, "", nil)
	case adapters.EventThinkingDelta:
		dst = s.flushCalls(dst)
		if ev.Signature != "" {
			s.signature = signatureToClient(ev.Signature)
		}
		if ev.Text == "" {
			return dst
		}
		text := ev.Text
		return s.chunk(dst, []part{s.sign(part{Text: &text, Thought: true})}, "", nil)
	case adapters.EventToolCallStart:
		if ev.ToolCall == nil {
			return dst
		}
		pc := &pendingCall{index: ev.Index, call: adapters.ToolCall{ID: ev.ToolCall.ID, Name: ev.ToolCall.Name}}
		pc.args.WriteString(ev.ToolCall.Arguments)
		s.calls = append(s.calls, pc)
	case adapters.EventToolCallDelta:
		if ev.ToolCall == nil {
			return dst
		}
		for _, pc := range s.calls {
			if pc.index == ev.Index {
				pc.args.WriteString(ev.ToolCall.Arguments)
			}
		}
	case adapters.EventFinish:
		dst = s.flushCalls(dst)
		r := ev.StopReason
		s.stop = &r
	case adapters.EventUsage:
		if ev.Usage == nil {
			return dst
		}
		u := *ev.Usage
		s.usage = &u
		if s.stop != nil {
			return s.final(dst)
		}
	}
	return dst
}

// sign puts a waiting thought signature on p.
func (s *streamEncoder) sign(p part) part {
	p.ThoughtSignature, s.signature = s.signature, ""
	return p
}

// flushCalls writes the gathered function calls in one chunk, as Gemini
// sends parallel calls.
func (s *streamEncoder) flushCalls(dst []byte) []byte {
	if len(s.calls) == 0 {
		return dst
	}
	parts := make([]part, 0, len(s.calls))
	for _, pc := range s.calls {
		args, err := argsObject(pc.args.String())
		if err != nil {
			args = json.RawMessage("{}")
		}
		p := part{FunctionCall: &functionCall{ID: pc.call.ID, Name: pc.call.Name, Args: args}}
		if len(parts) == 0 {
			p = s.sign(p)
		}
		parts = append(parts, p)
	}
	s.calls = s.calls[:0]
	return s.chunk(dst, parts, "", nil)
}

// final writes the last chunk: finish reason and usage.
func (s *streamEncoder) final(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	reason := adapters.StopEnd
	if s.stop != nil {
		reason = *s.stop
	}
	empty := ""
	p := s.sign(part{Text: &empty})
	var u *usageMetadata
	if s.usage != nil {
		u = usageToWire(*s.usage)
	}
	return s.chunk(dst, []part{p}, finishReasonToWire(reason), u)
}

func (s *streamEncoder) chunk(dst []byte, parts []part, finish string, u *usageMetadata) []byte {
	if s.model == "" {
		s.model = s.req.Model
	}
	if s.id == "" {
		s.id = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	c := generateResponse{
		Candidates:    []candidate{{Content: &content{Role: "model", Parts: parts}, FinishReason: finish}},
		UsageMetadata: u,
		ModelVersion:  s.model,
		ResponseID:    s.id,
	}
	b, _ := json.Marshal(c)
	return adapters.AppendSSE(dst, "", b)
}

// Finish writes what is still held: calls, then the last chunk. Gemini has
// no end marker; the stream just ends.
func (s *streamEncoder) Finish(dst []byte) []byte {
	if s.done || s.passthrough {
		return dst
	}
	return s.final(s.flushCalls(dst))
}

// Error appends a chunk holding Gemini's error object, which the Gen AI
// SDKs raise as an APIError.
func (s *streamEncoder) Error(dst []byte, e *adapters.Error) []byte {
	s.done = true
	return adapters.AppendSSE(dst, "", encodeError(e))
}
