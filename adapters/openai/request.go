package openai

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// EncodeChatRequest renders a neutral chat as an OpenAI chat completions
// body for the given upstream model, asking for usage when streaming.
func EncodeChatRequest(req *adapters.Request, model string) ([]byte, error) {
	w, err := encodeChat(req, model)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// encodeChat builds the body EncodeChatRequest sends, for a compatible
// server's options to adjust (EncodeChatRequestWith).
func encodeChat(req *adapters.Request, model string) (*chatRequest, error) {
	c := req.Chat
	if c == nil {
		return nil, adapters.BadRequest("the request has no conversation to send")
	}
	w := chatRequest{
		Model:               model,
		Stream:              req.Stream,
		ParallelToolCalls:   c.ParallelToolCalls,
		MaxCompletionTokens: c.MaxTokens,
		Temperature:         c.Temperature,
		TopP:                c.TopP,
		Stop:                c.Stop,
		N:                   c.N,
		Seed:                c.Seed,
		PresencePenalty:     c.PresencePenalty,
		FrequencyPenalty:    c.FrequencyPenalty,
		User:                c.User,
		PromptCacheKey:      c.CacheKey,
	}
	if req.Stream {
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if w.MaxCompletionTokens == nil && req.OutputAllowance > 0 {
		w.MaxCompletionTokens = &req.OutputAllowance
	}
	// top_k has no OpenAI counterpart; it is a sampling hint, dropped
	// rather than refused (Gemini CLI sends topK with every request)
	if r := c.Reasoning; r != nil && takesReasoning(model) {
		w.ReasoningEffort = r.Effort
		if w.ReasoningEffort == "" && r.BudgetTokens > 0 {
			w.ReasoningEffort = effortForBudget(r.BudgetTokens)
		}
		if w.ReasoningEffort == "max" {
			w.ReasoningEffort = "high" // Anthropic's top effort
		}
	}
	if limit := maxOutput(model); limit > 0 && w.MaxCompletionTokens != nil && *w.MaxCompletionTokens > limit {
		// a limit written for another family's model (Claude Code asks
		// for 32000) is cut to what this one can give, not refused
		w.MaxCompletionTokens = &limit
	}
	if len(w.User) > 64 {
		// OpenAI takes 64 characters; a longer id (Claude Code's JSON
		// metadata) goes as a stable digest of itself
		sum := sha256.Sum256([]byte(w.User))
		w.User = "sha256-" + hex.EncodeToString(sum[:16])
	}
	if rf := c.ResponseFormat; rf != nil {
		w.ResponseFormat = &responseFormat{Type: rf.Type}
		if rf.Type == "json_schema" {
			w.ResponseFormat.JSONSchema = &jsonSchema{Name: orDefault(rf.Name, "response"), Schema: rf.Schema, Strict: rf.Strict}
		}
	}
	for _, t := range c.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, adapters.Unsupported("tool %q of type %q cannot be sent to an OpenAI channel: only function tools translate", t.Name, t.Type)
		}
		w.Tools = append(w.Tools, tool{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if tc := c.ToolChoice; tc != nil {
		var raw []byte
		if tc.Mode == adapters.ToolChoiceTool {
			raw, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		} else {
			raw, _ = json.Marshal(tc.Mode)
		}
		w.ToolChoice = raw
	}
	if len(c.System) > 0 {
		var sys strings.Builder
		for i, p := range c.System {
			if i > 0 {
				sys.WriteString("\n")
			}
			sys.WriteString(p.Text)
		}
		s := sys.String()
		w.Messages = append(w.Messages, chatMessage{Role: "system", Content: messageContent{Text: &s}})
	}
	for _, m := range c.Messages {
		msgs, err := messageToWire(m)
		if err != nil {
			return nil, err
		}
		w.Messages = append(w.Messages, msgs...)
	}
	return &w, nil
}

func orDefault(s, d string) string {
	if s != "" {
		return s
	}
	return d
}

// noReasoning lists the model families that refuse reasoning_effort: a
// translated request's thinking is dropped for them rather than refused.
var noReasoning = []string{"gpt-4", "gpt-3.5", "chatgpt-4o"}

func takesReasoning(model string) bool {
	for _, p := range noReasoning {
		if strings.HasPrefix(model, p) {
			return false
		}
	}
	return true
}

// maxOutputs are the completion limits of OpenAI models whose limit is
// below what clients of other families ask for, longest prefix first.
var maxOutputs = []struct {
	prefix string
	limit  int64
}{
	{"gpt-4o-mini", 16384}, {"gpt-4o", 16384}, {"chatgpt-4o", 16384},
	{"gpt-4.1", 32768}, {"gpt-4-turbo", 4096}, {"gpt-3.5-turbo", 4096},
}

func maxOutput(model string) int64 {
	for _, m := range maxOutputs {
		if strings.HasPrefix(model, m.prefix) {
			return m.limit
		}
	}
	return 0
}

// effortForBudget maps a thinking budget in tokens to OpenAI's effort words.
func effortForBudget(n int64) string {
	switch {
	case n < 4096:
		return "low"
	case n < 16384:
		return "medium"
	}
	return "high"
}

// messageToWire renders one neutral message; a message of tool results
// becomes one OpenAI tool message per result.
func messageToWire(m adapters.Message) ([]chatMessage, error) {
	switch m.Role {
	case adapters.RoleSystem:
		// an instruction at its place in the conversation
		var text strings.Builder
		for _, p := range m.Parts {
			text.WriteString(p.Text)
		}
		s := text.String()
		return []chatMessage{{Role: "system", Content: messageContent{Text: &s}}}, nil
	case adapters.RoleTool, adapters.RoleUser:
		var out []chatMessage
		var parts []contentPart
		for _, p := range m.Parts {
			if p.Type == adapters.PartToolResult {
				text, err := toolResultText(p.ToolResult)
				if err != nil {
					return nil, err
				}
				out = append(out, chatMessage{Role: "tool", ToolCallID: p.ToolResult.CallID, Content: messageContent{Text: &text}})
				continue
			}
			cp, err := partToWire(p)
			if err != nil {
				return nil, err
			}
			parts = append(parts, cp)
		}
		if len(parts) > 0 {
			out = append(out, chatMessage{Role: "user", Content: contentFromParts(parts)})
		}
		return out, nil
	case adapters.RoleAssistant:
		msg := chatMessage{Role: "assistant"}
		var text strings.Builder
		for _, p := range m.Parts {
			switch p.Type {
			case adapters.PartText:
				text.WriteString(p.Text)
			case adapters.PartThinking:
				// OpenAI takes no reasoning back in the history
			case adapters.PartToolCall:
				msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: p.ToolCall.ID, Type: "function", Function: functionCall{Name: p.ToolCall.Name, Arguments: orDefault(p.ToolCall.Arguments, "{}")}})
			default:
				return nil, adapters.Unsupported("an assistant message with %s content cannot be sent to an OpenAI channel", p.Type)
			}
		}
		if text.Len() > 0 || len(msg.ToolCalls) == 0 {
			s := text.String()
			msg.Content = messageContent{Text: &s}
		}
		return []chatMessage{msg}, nil
	}
	return nil, adapters.BadRequest("unknown message role %q", m.Role)
}

// contentFromParts keeps a lone text part a plain string, as most clients send it.
func contentFromParts(parts []contentPart) messageContent {
	if len(parts) == 1 && parts[0].Type == "text" {
		s := parts[0].Text
		return messageContent{Text: &s}
	}
	return messageContent{Parts: parts, IsParts: true}
}

func partToWire(p adapters.Part) (contentPart, error) {
	switch p.Type {
	case adapters.PartText:
		return contentPart{Type: "text", Text: p.Text}, nil
	case adapters.PartImage:
		u := p.Image.URL
		if u == "" {
			u = "data:" + p.Image.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Image.Data)
		}
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: u, Detail: p.Image.Detail}}, nil
	}
	return contentPart{}, adapters.Unsupported("content of type %q cannot be sent to an OpenAI channel", p.Type)
}

// toolResultText flattens a tool result: OpenAI tool messages take text only.
func toolResultText(r *adapters.ToolResult) (string, error) {
	var b strings.Builder
	for _, p := range r.Content {
		if p.Type != adapters.PartText {
			return "", adapters.Unsupported("a tool result with %s content cannot be sent to an OpenAI channel: tool messages take text only", p.Type)
		}
		b.WriteString(p.Text)
	}
	if r.IsError && b.Len() == 0 {
		b.WriteString("error")
	}
	return b.String(), nil
}
