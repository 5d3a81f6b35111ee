package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// EncodeResponse implements adapters.Dialect.
func (Adapter) EncodeResponse(req *adapters.Request, resp *adapters.Response) ([]byte, error) {
	if req.Op == adapters.OpRerank {
		return EncodeRerankAnswer(req, resp)
	}
	if resp.Dialect == Name && resp.Raw != nil {
		return resp.Raw, nil
	}
	if req.Op == adapters.OpResponses {
		return EncodeResponsesAnswer(req, resp)
	}
	if req.Op == adapters.OpEmbedding && resp.Embeddings != nil {
		return encodeEmbeddings(req, resp)
	}
	if req.Op != adapters.OpChat {
		return nil, adapters.Unsupported("this endpoint cannot be answered by a channel of another family")
	}
	msg := chatMessage{Role: "assistant"}
	var text strings.Builder
	for _, p := range resp.Message.Parts {
		switch p.Type {
		case adapters.PartText:
			text.WriteString(p.Text)
		case adapters.PartThinking:
			msg.Reasoning += p.Text
		case adapters.PartToolCall:
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: p.ToolCall.ID, Type: "function", Function: functionCall{Name: p.ToolCall.Name, Arguments: p.ToolCall.Arguments}})
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		s := text.String()
		msg.Content = messageContent{Text: &s}
	}
	finish := finishReason(resp.StopReason)
	out := chatResponse{
		ID:      orID(resp.ID),
		Object:  "chat.completion",
		Created: orNow(resp.Created),
		Model:   orModel(resp.Model, req.Model),
		Choices: []chatChoice{{Index: 0, Message: &msg, FinishReason: &finish}},
		Usage:   usageToWire(resp.Usage),
	}
	return json.Marshal(out)
}

func orID(id string) string {
	if id != "" {
		return id
	}
	return "chatcmpl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func orNow(t int64) int64 {
	if t != 0 {
		return t
	}
	return time.Now().Unix()
}

func orModel(m, fallback string) string {
	if m != "" {
		return m
	}
	return fallback
}

func finishReason(r adapters.StopReason) string {
	switch r {
	case adapters.StopLength:
		return "length"
	case adapters.StopToolCalls:
		return "tool_calls"
	case adapters.StopContentFilter, adapters.StopRefusal:
		return "content_filter"
	}
	return "stop"
}

func stopReason(f string) adapters.StopReason {
	switch f {
	case "length":
		return adapters.StopLength
	case "tool_calls", "function_call":
		return adapters.StopToolCalls
	case "content_filter":
		return adapters.StopContentFilter
	}
	return adapters.StopEnd
}

func usageToWire(u adapters.Usage) *usage {
	w := &usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	w.PromptTokensDetails = &promptDetails{CachedTokens: u.CachedTokens}
	w.CompletionTokensDetails = &completionsDetails{ReasoningTokens: u.ReasoningTokens}
	return w
}

func usageFromWire(w *usage) adapters.Usage {
	if w == nil {
		return adapters.Usage{}
	}
	u := adapters.Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens}
	if w.PromptTokensDetails != nil {
		u.CachedTokens = w.PromptTokensDetails.CachedTokens
	}
	if u.CachedTokens == 0 {
		u.CachedTokens = w.vendorCachedTokens()
	}
	if w.CompletionTokensDetails != nil {
		u.ReasoningTokens = w.CompletionTokensDetails.ReasoningTokens
	}
	if u.CompletionTokens == 0 && w.TotalTokens > u.PromptTokens {
		u.CompletionTokens = w.TotalTokens - u.PromptTokens
	}
	return u
}

// EncodeError implements adapters.Dialect: {"error":{"message","type","param","code"}}.
func (Adapter) EncodeError(e *adapters.Error) []byte {
	return encodeError(e)
}

func encodeError(e *adapters.Error) []byte {
	d := errorDetail{Message: e.Message, Type: string(e.Type)}
	if d.Type == "" {
		d.Type = string(adapters.ErrorTypeForStatus(e.Status))
	}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = e.Code
	}
	b, _ := json.Marshal(errorBody{Error: &d})
	return b
}

// EncodeModels implements adapters.Dialect.
func (Adapter) EncodeModels(models []adapters.ModelInfo) []byte {
	list := modelList{Object: "list", Data: make([]modelObject, len(models))}
	for i, m := range models {
		list.Data[i] = modelObject{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy}
	}
	b, _ := json.Marshal(list)
	return b
}

// EncodeModel implements adapters.Dialect, for GET /v1/models/{id}.
func (Adapter) EncodeModel(m adapters.ModelInfo) []byte {
	b, _ := json.Marshal(modelObject{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy})
	return b
}

// NewStreamEncoder implements adapters.Dialect.
func (Adapter) NewStreamEncoder(req *adapters.Request) adapters.StreamEncoder {
	if req.Op == adapters.OpResponses {
		return NewResponsesStreamEncoder(req)
	}
	return &streamEncoder{req: req, toolIndex: map[int]int{}}
}

type streamEncoder struct {
	req       *adapters.Request
	id, model string
	created   int64
	toolIndex map[int]int // neutral block index -> OpenAI tool_calls index
	started   bool
}

func (s *streamEncoder) ContentType() string { return "text/event-stream" }

func (s *streamEncoder) Encode(dst []byte, ev *adapters.StreamEvent) []byte {
	if ev.Dialect == Name && ev.Raw != nil {
		if ev.Type == adapters.EventUsage && !s.req.IncludeUsage {
			return dst
		}
		return append(dst, ev.Raw...)
	}
	if ev.Type == adapters.EventPassthrough {
		return dst
	}
	switch ev.Type {
	case adapters.EventStart:
		s.id, s.model = ev.ID, ev.Model
		return s.start(dst)
	case adapters.EventTextDelta:
		dst = s.start(dst)
		t := ev.Text
		return s.chunk(dst, &chunkDelta{Content: &t}, nil, nil)
	case adapters.EventThinkingDelta:
		if ev.Text == "" {
			return dst
		}
		dst = s.start(dst)
		return s.chunk(dst, &chunkDelta{Reasoning: ev.Text}, nil, nil)
	case adapters.EventToolCallStart:
		dst = s.start(dst)
		idx := len(s.toolIndex)
		s.toolIndex[ev.Index] = idx
		tc := toolCall{Index: &idx, ID: ev.ToolCall.ID, Type: "function", Function: functionCall{Name: ev.ToolCall.Name, Arguments: ev.ToolCall.Arguments}}
		return s.chunk(dst, &chunkDelta{ToolCalls: []toolCall{tc}}, nil, nil)
	case adapters.EventToolCallDelta:
		idx, ok := s.toolIndex[ev.Index]
		if !ok || ev.ToolCall == nil || ev.ToolCall.Arguments == "" {
			return dst
		}
		tc := toolCall{Index: &idx, Function: functionCall{Arguments: ev.ToolCall.Arguments}}
		return s.chunk(dst, &chunkDelta{ToolCalls: []toolCall{tc}}, nil, nil)
	case adapters.EventFinish:
		dst = s.start(dst)
		f := finishReason(ev.StopReason)
		return s.chunk(dst, &chunkDelta{}, &f, nil)
	case adapters.EventUsage:
		if !s.req.IncludeUsage || ev.Usage == nil {
			return dst
		}
		dst = s.start(dst)
		return s.chunk(dst, nil, nil, usageToWire(*ev.Usage))
	}
	return dst
}

// start emits the first chunk, carrying the assistant role, once.
func (s *streamEncoder) start(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	if s.id == "" {
		s.id = orID("")
	}
	if s.model == "" {
		s.model = s.req.Model
	}
	s.created = time.Now().Unix()
	empty := ""
	return s.chunk(dst, &chunkDelta{Role: "assistant", Content: &empty}, nil, nil)
}

// chunkDelta is a stream chunk's delta: unlike a message, every field is
// left out when empty, as OpenAI sends them.
type chunkDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Reasoning string     `json:"reasoning_content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int         `json:"index"`
	Delta        *chunkDelta `json:"delta"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

func (s *streamEncoder) chunk(dst []byte, delta *chunkDelta, finish *string, u *usage) []byte {
	c := chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Usage: u, Choices: []chunkChoice{}}
	if delta != nil {
		c.Choices = append(c.Choices, chunkChoice{Delta: delta, FinishReason: finish})
	}
	b, _ := json.Marshal(c)
	return adapters.AppendSSE(dst, "", b)
}

// Finish appends OpenAI's end marker.
func (s *streamEncoder) Finish(dst []byte) []byte {
	return append(dst, "data: [DONE]\n\n"...)
}

// Error appends an in-stream error event; OpenAI's SDKs raise it as an
// APIError, where a stream that just ends would look like a normal finish.
func (s *streamEncoder) Error(dst []byte, e *adapters.Error) []byte {
	return adapters.AppendSSE(dst, "", encodeError(e))
}

// encodeEmbeddings renders vectors another family answered as OpenAI's
// embedding list, base64 (little-endian float32) when the client asked.
func encodeEmbeddings(req *adapters.Request, resp *adapters.Response) ([]byte, error) {
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int64 `json:"prompt_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: make([]item, len(resp.Embeddings)), Model: req.Model}
	base64Out := req.Embedding != nil && req.Embedding.EncodingFormat == "base64"
	for i, v := range resp.Embeddings {
		out.Data[i] = item{Object: "embedding", Index: i, Embedding: v}
		if base64Out {
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			out.Data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = resp.Usage.PromptTokens, resp.Usage.PromptTokens
	return json.Marshal(out)
}
