package anthropic

import (
	"encoding/json"
	"net/http"
	"strconv"
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
		return nil, adapters.Unsupported("this endpoint cannot be answered by a channel of another family")
	}
	out := messageResponse{
		ID:    orID(resp.ID),
		Type:  "message",
		Role:  "assistant",
		Model: orModel(resp.Model, req.Model),
		Usage: usageToWire(resp.Usage),
	}
	out.Content = []block{}
	for _, p := range resp.Message.Parts {
		switch p.Type {
		case adapters.PartText:
			if p.Text != "" {
				out.Content = append(out.Content, block{Type: "text", Text: p.Text})
			}
		case adapters.PartThinking:
			if p.Redacted != "" {
				out.Content = append(out.Content, block{Type: "redacted_thinking", Data: p.Redacted})
				continue
			}
			text, sig := p.Text, clientSignature(p.Signature)
			out.Content = append(out.Content, block{Type: "thinking", Thinking: &text, Signature: &sig})
		case adapters.PartToolCall:
			input, err := argumentsObject(p.ToolCall.Arguments)
			if err != nil {
				input = json.RawMessage("{}") // a cut-off call; the stop reason says so
			}
			out.Content = append(out.Content, block{Type: "tool_use", ID: p.ToolCall.ID, Name: p.ToolCall.Name, Input: input})
		}
	}
	reason := stopReasonToWire(resp.StopReason)
	out.StopReason = &reason
	return json.Marshal(out)
}

// clientSignature is how a neutral signature is shown to an Anthropic
// client: Anthropic's own without its tag, another vendor's with it, so the
// gateway knows where it came from when the client sends it back.
func clientSignature(sig string) string {
	if s, ok := adapters.UntagSignature(Name, sig); ok {
		return s
	}
	return sig
}

func orID(id string) string {
	if id != "" {
		return id
	}
	return "msg_gw" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func orModel(m, fallback string) string {
	if m != "" {
		return m
	}
	return fallback
}

func stopReasonToWire(r adapters.StopReason) string {
	switch r {
	case adapters.StopLength:
		return "max_tokens"
	case adapters.StopToolCalls:
		return "tool_use"
	case adapters.StopContentFilter, adapters.StopRefusal:
		return "refusal"
	}
	return "end_turn"
}

func stopReason(s string) adapters.StopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return adapters.StopLength
	case "tool_use":
		return adapters.StopToolCalls
	case "refusal":
		return adapters.StopRefusal
	}
	return adapters.StopEnd // end_turn, stop_sequence, pause_turn
}

// usageToWire splits neutral prompt tokens back into Anthropic's three
// input counts.
func usageToWire(u adapters.Usage) *usage {
	input := max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0)
	w := &usage{InputTokens: &input, OutputTokens: u.CompletionTokens}
	w.CacheCreationInputTokens = &u.CacheWriteTokens
	w.CacheReadInputTokens = &u.CachedTokens
	if u.CacheWriteTokens > 0 {
		h := min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
		w.CacheCreation = &cacheCreation{Ephemeral5m: u.CacheWriteTokens - h, Ephemeral1h: h}
	}
	return w
}

func usageFromWire(w *usage) adapters.Usage {
	var t usageTotals
	t.merge(w)
	return t.neutral()
}

// usageTotals gathers Anthropic's counts over a stream: message_start has
// them all, message_delta repeats the ones that changed, cumulatively.
type usageTotals struct {
	input, cacheRead, cacheWrite, cacheWrite1h, output, thinking int64
}

func (t *usageTotals) merge(w *usage) {
	if w == nil {
		return
	}
	if w.InputTokens != nil {
		t.input = *w.InputTokens
	}
	if w.CacheReadInputTokens != nil {
		t.cacheRead = *w.CacheReadInputTokens
	}
	if w.CacheCreationInputTokens != nil {
		t.cacheWrite = *w.CacheCreationInputTokens
	}
	if w.CacheCreation != nil {
		t.cacheWrite1h = w.CacheCreation.Ephemeral1h
		// the split without the total (not seen, but the two must agree)
		if w.CacheCreationInputTokens == nil {
			t.cacheWrite = w.CacheCreation.Ephemeral5m + w.CacheCreation.Ephemeral1h
		}
	}
	if w.OutputTokensDetails != nil {
		t.thinking = w.OutputTokensDetails.ThinkingTokens
	}
	t.output = w.OutputTokens
}

// neutral counts prompt tokens as OpenAI does: cached ones included.
func (t usageTotals) neutral() adapters.Usage {
	return adapters.Usage{
		PromptTokens:     t.input + t.cacheRead + t.cacheWrite,
		CompletionTokens: t.output,
		CachedTokens:     t.cacheRead,
		CacheWriteTokens: t.cacheWrite,
		// the 1-hour writes are part of the writes
		CacheWrite1hTokens: min(t.cacheWrite1h, t.cacheWrite),
		ReasoningTokens:    t.thinking,
	}
}

// EncodeError implements adapters.Dialect: {"type":"error","error":{"type","message"}}.
func (Adapter) EncodeError(e *adapters.Error) []byte {
	return encodeError(e)
}

func encodeError(e *adapters.Error) []byte {
	b, _ := json.Marshal(errorBody{Type: "error", Error: &errorDetail{Type: errorTypeToWire(e), Message: e.Message}})
	return b
}

// errorTypeToWire maps the neutral (OpenAI) error vocabulary to Anthropic's.
func errorTypeToWire(e *adapters.Error) string {
	switch e.Type {
	case adapters.ErrInvalidRequest, adapters.ErrAuthentication, adapters.ErrPermission, adapters.ErrNotFound,
		adapters.ErrRequestTooLarge, adapters.ErrRateLimit, adapters.ErrAPI, adapters.ErrOverloaded:
		return string(e.Type)
	case adapters.ErrInsufficientQuota:
		return string(adapters.ErrRateLimit)
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return string(adapters.ErrInvalidRequest)
	case 0:
		return string(adapters.ErrAPI)
	}
	t := adapters.ErrorTypeForStatus(e.Status)
	if t == adapters.ErrInvalidRequest && e.Status >= 500 {
		return string(adapters.ErrAPI)
	}
	return string(t)
}

// errorTypeFromWire maps Anthropic's error types to the neutral vocabulary.
func errorTypeFromWire(t string, status int) adapters.ErrorType {
	switch typ := adapters.ErrorType(t); typ {
	case adapters.ErrInvalidRequest, adapters.ErrAuthentication, adapters.ErrPermission, adapters.ErrNotFound,
		adapters.ErrRequestTooLarge, adapters.ErrRateLimit, adapters.ErrAPI, adapters.ErrOverloaded:
		return typ
	}
	return adapters.ErrorTypeForStatus(status) // billing_error, timeout_error, ...
}

// EncodeModels implements adapters.Dialect.
func (Adapter) EncodeModels(models []adapters.ModelInfo) []byte {
	list := modelList{Data: make([]modelObject, len(models))}
	for i, m := range models {
		list.Data[i] = modelToWire(m)
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
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
	return modelObject{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339)}
}

// EncodeTokenCount implements adapters.TokenCountEncoder.
func (Adapter) EncodeTokenCount(n int64) []byte {
	b, _ := json.Marshal(countTokensResponse{InputTokens: n})
	return b
}

// NewStreamEncoder implements adapters.Dialect.
func (Adapter) NewStreamEncoder(req *adapters.Request) adapters.StreamEncoder {
	return &streamEncoder{req: req, blocks: map[blockKey]int{}}
}

// blockKey names a neutral content block: its index and kind, since some
// upstreams number text and reasoning alike.
type blockKey struct {
	index int
	kind  string // text, thinking, tool
}

// streamEncoder writes Anthropic's named events. Blocks are numbered in the
// order they open, as Anthropic's SDKs require; the previous block is
// closed when another starts. message_delta waits for the usage, which
// OpenAI and Gemini send after the finish reason.
type streamEncoder struct {
	req       *adapters.Request
	id, model string
	started   bool
	blocks    map[blockKey]int // neutral block -> Anthropic index
	cur       blockKey
	open      bool
	next      int
	stop      *adapters.StopReason
	usage     *adapters.Usage
	delta     bool // message_delta written
	done      bool // message_stop written
	// passthrough is set once the upstream's own frames are written: they
	// end with its message_stop, so Finish adds nothing.
	passthrough bool
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
		return s.start(dst)
	case adapters.EventTextDelta:
		if ev.Text == "" {
			return dst
		}
		dst, i := s.block(s.start(dst), blockKey{ev.Index, "text"}, nil)
		return s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: textDelta{Type: "text_delta", Text: ev.Text}})
	case adapters.EventThinkingDelta:
		if ev.Text == "" && ev.Signature == "" {
			return dst
		}
		dst, i := s.block(s.start(dst), blockKey{ev.Index, "thinking"}, nil)
		if ev.Text != "" {
			dst = s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: thinkingDelta{Type: "thinking_delta", Thinking: ev.Text}})
		}
		if ev.Signature != "" {
			dst = s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: signatureDelta{Type: "signature_delta", Signature: clientSignature(ev.Signature)}})
		}
		return dst
	case adapters.EventToolCallStart:
		if ev.ToolCall == nil {
			return dst
		}
		key := blockKey{ev.Index, "tool"}
		delete(s.blocks, key) // a new call always opens a new block
		dst, i := s.block(s.start(dst), key, ev.ToolCall)
		if ev.ToolCall.Arguments != "" {
			dst = s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: jsonDelta{Type: "input_json_delta", PartialJSON: ev.ToolCall.Arguments}})
		}
		return dst
	case adapters.EventToolCallDelta:
		i, ok := s.blocks[blockKey{ev.Index, "tool"}]
		if !ok || ev.ToolCall == nil || ev.ToolCall.Arguments == "" {
			return dst
		}
		return s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: jsonDelta{Type: "input_json_delta", PartialJSON: ev.ToolCall.Arguments}})
	case adapters.EventFinish:
		dst = s.closeBlock(s.start(dst))
		r := ev.StopReason
		s.stop = &r
		return dst
	case adapters.EventUsage:
		if ev.Usage == nil {
			return dst
		}
		u := *ev.Usage
		s.usage = &u
		if s.stop != nil {
			return s.messageDelta(dst)
		}
	}
	return dst
}

func (s *streamEncoder) start(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	s.id, s.model = orID(s.id), orModel(s.model, s.req.Model)
	zero := int64(0)
	msg := messageResponse{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []block{}, Usage: &usage{InputTokens: &zero}}
	return s.event(dst, "message_start", messageStart{Type: "message_start", Message: &msg})
}

// block makes key the open block, closing the one before; tc is set when
// a tool call opens it.
func (s *streamEncoder) block(dst []byte, key blockKey, tc *adapters.ToolCall) ([]byte, int) {
	if s.open && s.cur == key {
		return dst, s.blocks[key]
	}
	dst = s.closeBlock(dst)
	i := s.next
	s.next++
	s.blocks[key], s.cur, s.open = i, key, true
	var cb any
	switch key.kind {
	case "thinking":
		cb = thinkingStart{Type: "thinking"}
	case "tool":
		cb = toolStart{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: json.RawMessage("{}")}
	default:
		cb = textStart{Type: "text"}
	}
	return s.event(dst, "content_block_start", blockStart{Type: "content_block_start", Index: i, ContentBlock: cb}), i
}

func (s *streamEncoder) closeBlock(dst []byte) []byte {
	if !s.open {
		return dst
	}
	s.open = false
	return s.event(dst, "content_block_stop", blockStop{Type: "content_block_stop", Index: s.blocks[s.cur]})
}

func (s *streamEncoder) messageDelta(dst []byte) []byte {
	if s.delta {
		return dst
	}
	s.delta = true
	reason := adapters.StopEnd
	if s.stop != nil {
		reason = *s.stop
	}
	w := &usage{}
	if s.usage != nil {
		w = usageToWire(*s.usage)
	}
	return s.event(dst, "message_delta", messageDeltaEvent{Type: "message_delta", Delta: messageDeltaBody{StopReason: stopReasonToWire(reason)}, Usage: w})
}

// Finish closes what is open and ends the message.
func (s *streamEncoder) Finish(dst []byte) []byte {
	if s.done || s.passthrough {
		return dst
	}
	dst = s.closeBlock(s.start(dst))
	dst = s.messageDelta(dst)
	s.done = true
	return s.event(dst, "message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
}

// Error appends Anthropic's in-stream error event, which its SDKs raise.
func (s *streamEncoder) Error(dst []byte, e *adapters.Error) []byte {
	s.done = true
	return adapters.AppendSSE(dst, "error", encodeError(e))
}

func (s *streamEncoder) event(dst []byte, name string, v any) []byte {
	b, _ := json.Marshal(v)
	return adapters.AppendSSE(dst, name, b)
}

// Stream event shapes, with their fields in Anthropic's order.

type messageStart struct {
	Type    string           `json:"type"`
	Message *messageResponse `json:"message"`
}

type blockStart struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type textStart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingStart struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type toolStart struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type blockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type textDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type signatureDelta struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type jsonDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type blockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string           `json:"type"`
	Delta messageDeltaBody `json:"delta"`
	Usage *usage           `json:"usage"`
}

type messageDeltaBody struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}
