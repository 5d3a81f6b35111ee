package openai

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// The OpenAI-compatible servers (DeepSeek, Qwen, Moonshot, Zhipu, Doubao,
// OpenRouter, Groq, Ollama, vLLM, ...) speak this wire with words of their
// own for a few things. What they add never collides with OpenAI's own
// fields, so every channel of type openai reads it, and the presets of
// adapters/openaicompat share it rather than copy it:
//
//   - reasoning: reasoning_content (DeepSeek, Qwen, Moonshot, Zhipu,
//     Doubao, vLLM before 0.10) or reasoning (OpenRouter, Groq, Ollama,
//     vLLM since) in a message and in a stream delta, the thinking that
//     Anthropic clients read as thinking blocks and Gemini clients as
//     thought parts;
//   - cache reads: prompt_tokens_details.cached_tokens (OpenAI, Qwen,
//     Zhipu, Doubao, OpenRouter, xAI), prompt_cache_hit_tokens (DeepSeek)
//     or cached_tokens at the top of usage (Moonshot), billed at the
//     model's cache price;
//   - tool call deltas without an index, or with one index for every call,
//     told apart by their ids;
//   - streams that end after their last chunk (its finish reason or its
//     usage) without data: [DONE].

// reasoning is the message's or the delta's reasoning text, in whichever
// word the server used; reasoning_content wins where a server sends both.
func (m *chatMessage) reasoning() string {
	if m.Reasoning != "" {
		return m.Reasoning
	}
	return string(m.AltReasoning)
}

// looseString is a member read when it is a string and ignored otherwise:
// reasoning is no OpenAI field, and a client or server that sends it in
// another shape is not refused for it.
type looseString string

func (l *looseString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = looseString(s)
	}
	return nil
}

// vendorCachedTokens is the cache reads of a usage without OpenAI's
// prompt_tokens_details: DeepSeek's prompt_cache_hit_tokens (its
// prompt_tokens being hits plus misses), Moonshot's top-level
// cached_tokens (counted in its prompt_tokens too).
func (w *usage) vendorCachedTokens() int64 {
	if w.PromptCacheHitTokens > 0 {
		return w.PromptCacheHitTokens
	}
	return w.CachedTokens
}

// toolBlock is the neutral block of a tool call delta, and whether the
// delta starts it. A delta with an index is OpenAI's; a server that sends
// none (or the same index for each of several calls) is read by the call's
// id: a new id starts a call, a repeated id or none continues one.
func (s *streamStep) toolBlock(tc toolCall) (block int, started bool) {
	if s.tools == nil {
		s.tools, s.toolIDs, s.blockIDs = map[int]int{}, map[string]int{}, map[int]string{}
	}
	if b, ok := s.toolIDs[tc.ID]; ok && tc.ID != "" {
		s.lastBlock = b
		return b, false
	}
	switch {
	case tc.Index != nil:
		b, ok := s.tools[*tc.Index]
		if ok && (tc.ID == "" || s.blockIDs[b] == "") {
			s.lastBlock = b
			return b, false
		}
		if b = 1 + *tc.Index; ok || s.blockIDs[b] != "" || s.blockStarted(b) {
			b = s.maxBlock + 1 // another call on an index already used
		}
		s.tools[*tc.Index] = b
		block = b
	case tc.ID == "" && s.lastBlock > 0:
		return s.lastBlock, false
	default:
		block = s.maxBlock + 1
	}
	s.toolIDs[tc.ID] = block
	s.blockIDs[block] = tc.ID
	s.lastBlock, s.maxBlock = block, max(s.maxBlock, block)
	return block, true
}

// blockStarted reports whether block b was started already.
func (s *streamStep) blockStarted(b int) bool {
	for _, x := range s.tools {
		if x == b {
			return true
		}
	}
	_, ok := s.blockIDs[b]
	return ok
}

// finishKey is how a chunk with a finish reason says so.
var finishKey = adapters.Key("finish_reason")

// finishEnd is where a relayed chunk leaves the stream: one with a finish
// reason may be the last a server sends (some send no [DONE]), but for
// "error", a failure's (OpenRouter's), after which a body that ends is cut.
func finishEnd(data []byte) adapters.StreamEnd {
	if v, ok := adapters.MemberValue(data, finishKey); ok && len(v) > 0 && v[0] == '"' && !bytes.HasPrefix(v, []byte(`"error"`)) {
		return adapters.StreamMayEnd
	}
	return adapters.StreamGoesOn
}

// finishedCleanly reports whether a finish reason ends a stream normally.
func finishedCleanly(reason string) bool { return reason != "error" }

// WireOptions are the ways a compatible server's requests differ from
// OpenAI's. The zero value is OpenAI's own.
type WireOptions struct {
	// MaxTokens sends the output limit as max_tokens, for servers that
	// ignore or refuse max_completion_tokens (DeepSeek, Mistral, Ollama,
	// older vLLM): a client's max_completion_tokens is renamed, and the
	// gateway's allowance goes in max_tokens.
	MaxTokens bool
	// NoStreamOptions leaves stream_options out, for servers that refuse
	// it and report a stream's usage in its last chunk anyway (Mistral).
	NoStreamOptions bool
	// ReasoningHistory sends an assistant turn's thinking back as its
	// reasoning_content, for servers whose thinking mode needs it with the
	// turn's tool calls (DeepSeek: a 400 without it).
	ReasoningHistory bool
	// NoReasoningEffort leaves reasoning_effort out of a translated
	// request, for servers that refuse it.
	NoReasoningEffort bool
	// ShortToolCallIDs sends a translated history's tool call ids as nine
	// letters and digits, for servers that refuse any other id (Mistral:
	// "must be a-z, A-Z, 0-9, with a length of 9"): the same id always
	// becomes the same short one, so a call and its result still match.
	ShortToolCallIDs bool
	// Thinking is how the server is asked to think when a translated
	// request asks for it (an Anthropic client's thinking, a Gemini
	// client's thinkingConfig), in place of reasoning_effort:
	// "enable_thinking" (Qwen: enable_thinking, and thinking_budget for a
	// budget) or "thinking" (Zhipu, Doubao, DeepSeek: thinking
	// {"type":"enabled"}). Empty: reasoning_effort, as OpenAI.
	Thinking string
}

// EncodeChatRequestWith is EncodeChatRequest for a compatible server.
func EncodeChatRequestWith(req *adapters.Request, model string, o WireOptions) ([]byte, error) {
	w, err := encodeChat(req, model)
	if err != nil {
		return nil, err
	}
	if o.MaxTokens {
		w.MaxTokens, w.MaxCompletionTokens = w.MaxCompletionTokens, nil
	}
	if o.NoStreamOptions {
		w.StreamOptions = nil
	}
	if o.NoReasoningEffort {
		w.ReasoningEffort = ""
	}
	var extra []adapters.Field
	if r := req.Chat.Reasoning; r != nil && o.Thinking != "" {
		w.ReasoningEffort = ""
		switch o.Thinking {
		case "enable_thinking":
			extra = append(extra, adapters.Field{Key: "enable_thinking", Value: true})
			if r.BudgetTokens > 0 {
				extra = append(extra, adapters.Field{Key: "thinking_budget", Value: r.BudgetTokens})
			}
		case "thinking":
			extra = append(extra, adapters.Field{Key: "thinking", Value: json.RawMessage(`{"type":"enabled"}`)})
		}
	}
	if o.ShortToolCallIDs {
		for i := range w.Messages {
			m := &w.Messages[i]
			for j := range m.ToolCalls {
				m.ToolCalls[j].ID = shortToolCallID(m.ToolCalls[j].ID)
			}
			if m.ToolCallID != "" {
				m.ToolCallID = shortToolCallID(m.ToolCallID)
			}
		}
	}
	if o.ReasoningHistory {
		// each neutral assistant message is one wire assistant message, in order
		i := 0
		for _, m := range req.Chat.Messages {
			if m.Role != adapters.RoleAssistant {
				continue
			}
			for i < len(w.Messages) && w.Messages[i].Role != "assistant" {
				i++
			}
			if i == len(w.Messages) {
				break
			}
			for _, p := range m.Parts {
				if p.Type == adapters.PartThinking {
					w.Messages[i].Reasoning += p.Text
				}
			}
			i++
		}
	}
	body, err := json.Marshal(w)
	if err != nil || len(extra) == 0 {
		return body, err
	}
	return adapters.AppendFields(body, extra...)
}

// PassthroughBodyWith is the body an OpenAI client's request is relayed
// with to a compatible server: the client's bytes, with the model, the
// usage request and the output limit set as the server takes them.
func PassthroughBodyWith(req *adapters.Request, model string, o WireOptions) ([]byte, error) {
	body, err := passthroughBodyWith(req, model, o)
	if err != nil || !o.MaxTokens || req.Op != adapters.OpChat {
		return body, err
	}
	// a client's max_completion_tokens goes as max_tokens, unless it set both
	v, found, err := adapters.TopLevelMember(body, "max_completion_tokens")
	if err != nil || !found {
		return body, nil
	}
	if _, both, _ := adapters.TopLevelMember(body, "max_tokens"); both {
		return removeMember(body, "max_completion_tokens")
	}
	body, err = adapters.SetFields(body, adapters.Field{Key: "max_tokens", Value: json.RawMessage(v)})
	if err != nil {
		return nil, err
	}
	return removeMember(body, "max_completion_tokens")
}

// removeMember is the JSON object raw without its top-level member key,
// every other member kept byte for byte.
func removeMember(raw []byte, key string) ([]byte, error) {
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	first := true
	err := adapters.EachMember(raw, func(k, v []byte) bool {
		if string(k) == key {
			return true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		kb, _ := json.Marshal(string(k))
		out = append(out, kb...)
		out = append(out, ':')
		out = append(out, v...)
		return true
	})
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// choiceUsage is the usage a chunk reports inside its first choice, as
// Moonshot's stream does, when it has none at the top.
func choiceUsage(data []byte) *usage {
	var c struct {
		Choices []struct {
			Usage *usage `json:"usage"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &c) != nil || len(c.Choices) == 0 {
		return nil
	}
	return c.Choices[0].Usage
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// shortToolCallID is id as nine letters and digits: itself when it is
// that already (the server's own ids, sent back), else drawn from its
// digest.
func shortToolCallID(id string) string {
	if len(id) == 9 && strings.Trim(id, idAlphabet) == "" {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	out := make([]byte, 9)
	for i := range out {
		out[i] = idAlphabet[int(sum[i])%len(idAlphabet)]
	}
	return string(out)
}
