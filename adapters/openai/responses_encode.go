package openai

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// A translated answer is rendered for a Responses client by one builder,
// fed neutral stream events: a stream's events as they come (writing the
// Responses events for each), or a finished answer's parts turned into the
// same events (writing nothing). Both end in the same response object, so a
// stream accumulated by an SDK equals the non-streamed answer.

// responsesEcho is what a response repeats of its request.
type responsesEcho struct {
	Instructions      json.RawMessage `json:"instructions"`
	MaxOutputTokens   *int64          `json:"max_output_tokens"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Reasoning         json.RawMessage `json:"reasoning"`
	Temperature       *float64        `json:"temperature"`
	Text              json.RawMessage `json:"text"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Tools             json.RawMessage `json:"tools"`
	TopP              *float64        `json:"top_p"`
	User              *string         `json:"user"`
	Metadata          json.RawMessage `json:"metadata"`
	Include           []string        `json:"include"`
}

// item is one output item being built.
type item struct {
	kind  string // message, reasoning, function_call
	index int    // the neutral block index it came from
	out   int    // output_index
	id    string
	text  strings.Builder // message text, reasoning text, call arguments
	sig   string
	call  adapters.ToolCall
	done  bool
}

// responsesBuilder builds one response, and when stream is set writes the
// events that build it.
type responsesBuilder struct {
	req     *adapters.Request
	echo    responsesEcho
	summary bool // reasoning.summary asked for: thinking shows as summary text
	blob    bool // include asked for reasoning.encrypted_content
	stream  bool
	seq     int64
	id      string
	model   string
	created int64
	items   []*item
	cur     *item
	calls   map[int]*item
	stop    adapters.StopReason
	usage   *adapters.Usage
	started bool
	dst     []byte
}

func newResponsesBuilder(req *adapters.Request, stream bool) *responsesBuilder {
	b := &responsesBuilder{req: req, stream: stream, calls: map[int]*item{}, created: time.Now().Unix()}
	_ = json.Unmarshal(req.Raw, &b.echo)
	var r struct {
		Reasoning *responsesReasoning `json:"reasoning"`
	}
	if json.Unmarshal(req.Raw, &r) == nil && r.Reasoning != nil {
		for _, s := range []*string{r.Reasoning.Summary, r.Reasoning.GenerateSummary} {
			if s != nil && *s != "" && *s != "none" {
				b.summary = true
			}
		}
	}
	for _, inc := range b.echo.Include {
		if inc == "reasoning.encrypted_content" {
			b.blob = true
		}
	}
	return b
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// event writes one stream event, numbered.
func (b *responsesBuilder) event(typ string, fields map[string]any) {
	if !b.stream {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = b.seq
	b.seq++
	data, _ := json.Marshal(fields)
	b.dst = adapters.AppendSSE(b.dst, typ, data)
}

func (b *responsesBuilder) start() {
	if b.started {
		return
	}
	b.started = true
	if b.id == "" {
		b.id = "resp_" + randomID()
	}
	if b.model == "" {
		b.model = b.req.Model
	}
	if b.stream {
		r := b.object("in_progress", nil)
		b.event("response.created", map[string]any{"response": r})
		b.event("response.in_progress", map[string]any{"response": r})
	}
}

// open closes the current item and starts a new one of the kind.
func (b *responsesBuilder) open(kind string, index int) *item {
	b.closeCurrent()
	it := &item{kind: kind, index: index, out: len(b.items)}
	prefix := map[string]string{"message": "msg_", "reasoning": "rs_", "function_call": "fc_"}[kind]
	it.id = prefix + strings.TrimPrefix(b.id, "resp_") + "_" + strconv.Itoa(it.out)
	b.items = append(b.items, it)
	b.cur = it
	switch kind {
	case "message":
		b.event("response.output_item.added", map[string]any{"output_index": it.out,
			"item": messageItem{ID: it.id, Type: "message", Status: "in_progress", Role: "assistant", Content: []outputText{}}})
		b.event("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.out, "content_index": 0,
			"part": outputText{Type: "output_text", Annotations: []struct{}{}, Logprobs: []struct{}{}}})
	case "reasoning":
		b.event("response.output_item.added", map[string]any{"output_index": it.out,
			"item": reasoningItem{ID: it.id, Type: "reasoning", Summary: []responsesSummaryText{}}})
		if b.summary {
			b.event("response.reasoning_summary_part.added", map[string]any{"item_id": it.id, "output_index": it.out, "summary_index": 0,
				"part": responsesSummaryText{Type: "summary_text"}})
		}
	}
	return it
}

func (b *responsesBuilder) closeCurrent() {
	it := b.cur
	b.cur = nil
	if it == nil || it.done {
		return
	}
	it.done = true
	switch it.kind {
	case "message":
		part := outputText{Type: "output_text", Text: it.text.String(), Annotations: []struct{}{}, Logprobs: []struct{}{}}
		b.event("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.out, "content_index": 0, "text": part.Text, "logprobs": []struct{}{}})
		b.event("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.out, "content_index": 0, "part": part})
	case "reasoning":
		if b.summary {
			text := it.text.String()
			b.event("response.reasoning_summary_text.done", map[string]any{"item_id": it.id, "output_index": it.out, "summary_index": 0, "text": text})
			b.event("response.reasoning_summary_part.done", map[string]any{"item_id": it.id, "output_index": it.out, "summary_index": 0,
				"part": responsesSummaryText{Type: "summary_text", Text: text}})
		}
	case "function_call":
		b.event("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.out, "arguments": it.text.String()})
	}
	b.event("response.output_item.done", map[string]any{"output_index": it.out, "item": b.render(it)})
}

// render is an item's final form.
func (b *responsesBuilder) render(it *item) any {
	switch it.kind {
	case "message":
		return messageItem{ID: it.id, Type: "message", Status: "completed", Role: "assistant",
			Content: []outputText{{Type: "output_text", Text: it.text.String(), Annotations: []struct{}{}, Logprobs: []struct{}{}}}}
	case "reasoning":
		r := reasoningItem{ID: it.id, Type: "reasoning", Summary: []responsesSummaryText{}}
		if b.summary && it.text.Len() > 0 {
			r.Summary = append(r.Summary, responsesSummaryText{Type: "summary_text", Text: it.text.String()})
		}
		if b.blob {
			s := encodeReasoningBlob(it.text.String(), it.sig)
			r.EncryptedContent = &s
		}
		return r
	}
	args := it.text.String()
	if args == "" {
		args = "{}"
	}
	return functionCallItem{ID: it.id, Type: "function_call", Status: "completed", Arguments: args, CallID: it.call.ID, Name: it.call.Name}
}

// add takes one neutral event.
func (b *responsesBuilder) add(ev *adapters.StreamEvent) {
	switch ev.Type {
	case adapters.EventStart:
		if !b.started {
			b.model = ev.Model
		}
		b.start()
	case adapters.EventTextDelta:
		b.start()
		it := b.cur
		if it == nil || it.kind != "message" {
			it = b.open("message", ev.Index)
		}
		if ev.Text == "" {
			return
		}
		it.text.WriteString(ev.Text)
		b.event("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.out, "content_index": 0, "delta": ev.Text, "logprobs": []struct{}{}})
	case adapters.EventThinkingDelta:
		b.start()
		it := b.cur
		if it == nil || it.kind != "reasoning" || it.index != ev.Index {
			it = b.open("reasoning", ev.Index)
		}
		if ev.Signature != "" {
			it.sig = ev.Signature
		}
		if ev.Text == "" {
			return
		}
		it.text.WriteString(ev.Text)
		if b.summary {
			b.event("response.reasoning_summary_text.delta", map[string]any{"item_id": it.id, "output_index": it.out, "summary_index": 0, "delta": ev.Text})
		}
	case adapters.EventToolCallStart:
		b.start()
		it := b.open("function_call", ev.Index)
		if ev.ToolCall != nil {
			it.call = adapters.ToolCall{ID: ev.ToolCall.ID, Name: ev.ToolCall.Name}
		}
		if it.call.ID == "" {
			it.call.ID = "call_" + strings.TrimPrefix(it.id, "fc_")
		}
		b.calls[ev.Index] = it
		b.event("response.output_item.added", map[string]any{"output_index": it.out,
			"item": functionCallItem{ID: it.id, Type: "function_call", Status: "in_progress", CallID: it.call.ID, Name: it.call.Name}})
		if ev.ToolCall != nil && ev.ToolCall.Arguments != "" {
			b.arguments(it, ev.ToolCall.Arguments)
		}
	case adapters.EventToolCallDelta:
		if it := b.calls[ev.Index]; it != nil && !it.done && ev.ToolCall != nil && ev.ToolCall.Arguments != "" {
			b.arguments(it, ev.ToolCall.Arguments)
		}
	case adapters.EventFinish:
		b.stop = ev.StopReason
	case adapters.EventUsage:
		if ev.Usage != nil {
			u := *ev.Usage
			b.usage = &u
		}
	}
}

func (b *responsesBuilder) arguments(it *item, delta string) {
	it.text.WriteString(delta)
	b.event("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.out, "delta": delta})
}

// object is the response in a status: the echo of the request, the output
// so far, and the usage once known.
func (b *responsesBuilder) object(status string, failure *responsesError) *responsesObject {
	e := b.echo
	o := &responsesObject{
		ID: b.id, Object: "response", CreatedAt: b.created, Status: status, Error: failure,
		Instructions: orNull(e.Instructions), MaxOutputTokens: e.MaxOutputTokens, Model: b.model,
		Output: []json.RawMessage{}, ParallelToolCalls: e.ParallelToolCalls == nil || *e.ParallelToolCalls,
		Reasoning: orJSON(e.Reasoning, `{"effort":null,"summary":null}`), Temperature: e.Temperature,
		Text: orJSON(e.Text, `{"format":{"type":"text"}}`), ToolChoice: orJSON(e.ToolChoice, `"auto"`),
		Tools: orJSON(e.Tools, `[]`), TopP: e.TopP, Truncation: "disabled", User: e.User,
		Metadata: orJSON(e.Metadata, `{}`),
	}
	if status == "in_progress" {
		return o
	}
	for _, it := range b.items {
		raw, _ := json.Marshal(b.render(it))
		o.Output = append(o.Output, raw)
	}
	if b.usage != nil {
		o.Usage = responsesUsageToWire(*b.usage)
	}
	return o
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func orJSON(raw json.RawMessage, def string) json.RawMessage {
	if isNull(raw) {
		return json.RawMessage(def)
	}
	return raw
}

// final is the last response: completed, or incomplete when the model ran
// out of tokens or was filtered.
func (b *responsesBuilder) final() (*responsesObject, string) {
	b.start()
	b.closeCurrent()
	switch b.stop {
	case adapters.StopLength:
		o := b.object("incomplete", nil)
		o.IncompleteDetails = &incompleteReason{Reason: "max_output_tokens"}
		return o, "response.incomplete"
	case adapters.StopContentFilter:
		o := b.object("incomplete", nil)
		o.IncompleteDetails = &incompleteReason{Reason: "content_filter"}
		return o, "response.incomplete"
	}
	return b.object("completed", nil), "response.completed"
}

func responsesUsageToWire(u adapters.Usage) *responsesUsage {
	w := &responsesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	w.InputTokensDetails.CachedTokens = u.CachedTokens
	w.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return w
}

func responsesUsageFromWire(w *responsesUsage) adapters.Usage {
	if w == nil {
		return adapters.Usage{}
	}
	return adapters.Usage{
		PromptTokens: w.InputTokens, CompletionTokens: w.OutputTokens,
		CachedTokens: w.InputTokensDetails.CachedTokens, ReasoningTokens: w.OutputTokensDetails.ReasoningTokens,
	}
}

// EncodeResponsesAnswer renders a finished neutral answer as a Responses
// API response object.
func EncodeResponsesAnswer(req *adapters.Request, resp *adapters.Response) ([]byte, error) {
	b := newResponsesBuilder(req, false)
	if resp.Model != "" {
		b.model = resp.Model
	}
	b.start()
	for i, p := range resp.Message.Parts {
		switch p.Type {
		case adapters.PartText:
			b.add(&adapters.StreamEvent{Type: adapters.EventTextDelta, Index: i, Text: p.Text})
		case adapters.PartThinking:
			if p.Text == "" && p.Signature == "" {
				continue // redacted thinking has no form a Responses client can carry
			}
			b.add(&adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: i, Text: p.Text, Signature: p.Signature})
		case adapters.PartToolCall:
			b.add(&adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: i, ToolCall: &adapters.ToolCall{ID: p.ToolCall.ID, Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments}})
		}
	}
	b.add(&adapters.StreamEvent{Type: adapters.EventFinish, StopReason: resp.StopReason})
	b.add(&adapters.StreamEvent{Type: adapters.EventUsage, Usage: &resp.Usage})
	o, _ := b.final()
	return json.Marshal(o)
}

// responsesEncoder writes a Responses event stream.
type responsesEncoder struct {
	b *responsesBuilder
	// passthrough: the upstream spoke the Responses API itself and its
	// frames, its end included, went out unchanged
	passthrough bool
}

// NewResponsesStreamEncoder renders neutral events as a Responses API
// event stream; a same-dialect upstream's frames pass unchanged.
func NewResponsesStreamEncoder(req *adapters.Request) adapters.StreamEncoder {
	return &responsesEncoder{b: newResponsesBuilder(req, true)}
}

func (s *responsesEncoder) ContentType() string { return "text/event-stream" }

func (s *responsesEncoder) Encode(dst []byte, ev *adapters.StreamEvent) []byte {
	if ev.Dialect == Name && ev.Raw != nil {
		s.passthrough = true
		return append(dst, ev.Raw...)
	}
	s.b.dst = dst
	s.b.add(ev)
	dst, s.b.dst = s.b.dst, nil
	return dst
}

// Finish writes the last items' done events and response.completed (or
// response.incomplete), which carries the whole response.
func (s *responsesEncoder) Finish(dst []byte) []byte {
	if s.passthrough {
		return dst
	}
	s.b.dst = dst
	o, typ := s.b.final()
	s.b.event(typ, map[string]any{"response": o})
	dst, s.b.dst = s.b.dst, nil
	return dst
}

// Error writes an error event and response.failed, as OpenAI ends a
// stream that fails.
func (s *responsesEncoder) Error(dst []byte, e *adapters.Error) []byte {
	s.b.dst = dst
	s.b.start()
	s.b.closeCurrent()
	code := e.Code
	if code == "" {
		code = string(e.Type)
	}
	var param any
	if e.Param != "" {
		param = e.Param
	}
	s.b.event("error", map[string]any{"code": code, "message": e.Message, "param": param})
	s.b.event("response.failed", map[string]any{"response": s.b.object("failed", &responsesError{Code: code, Message: e.Message})})
	dst, s.b.dst = s.b.dst, nil
	return dst
}
