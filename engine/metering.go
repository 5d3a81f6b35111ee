package engine

import (
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// BilledUsage is what a relayed request is billed on: the upstream's
// counts, or when it reported none, the local tokenizer's. A stream cut
// before its end event (the client left and the drain after it stopped at
// a bound, the upstream broke) reported at most partial usage (Anthropic's
// message_start, Gemini's counts so far), so it is billed
// the larger of that usage, plus what was generated after it, and a local
// count of everything generated, reasoning included.
//
// u is what the upstream reported, text the completion text relayed up to
// its last report and tail the text after it; cut says the stream ended
// before its end event.
func BilledUsage(req *adapters.Request, u adapters.Usage, text, tail string, cut bool) adapters.Usage {
	if !u.Known() {
		return EstimateUsage(req, text+tail)
	}
	if !cut {
		return u
	}
	local := EstimateUsage(req, text+tail)
	after := tokenizer.Count(req.Model, tail)
	if c := u.CompletionTokens + after; c > local.CompletionTokens {
		local.CompletionTokens = c
	}
	local.PromptTokens = max(local.PromptTokens, u.PromptTokens)
	local.CachedTokens, local.CacheWriteTokens = u.CachedTokens, u.CacheWriteTokens
	local.ReasoningTokens = u.ReasoningTokens
	local.Estimated = local.CompletionTokens != u.CompletionTokens || local.PromptTokens != u.PromptTokens
	return local
}

// EstimateUsage counts tokens locally for an upstream that reported none.
func EstimateUsage(req *adapters.Request, completion string) adapters.Usage {
	u := adapters.Usage{Estimated: true}
	switch {
	case req.Chat != nil:
		u.PromptTokens = tokenizer.CountChat(req.Model, ChatTexts(req.Chat))
	case req.Completion != nil:
		for _, p := range req.Completion.Prompt {
			u.PromptTokens += tokenizer.Count(req.Model, p)
		}
	case req.Embedding != nil:
		for _, in := range req.Embedding.Input {
			u.PromptTokens += tokenizer.Count(req.Model, in)
		}
	case req.Rerank != nil:
		u.PromptTokens = RerankTokens(req.Model, req.Rerank)
	}
	u.CompletionTokens = tokenizer.Count(req.Model, completion)
	return u
}

// ChatTexts lists the text of each message, system first, for counting.
func ChatTexts(c *adapters.ChatRequest) []string {
	if c == nil {
		return nil
	}
	var out []string
	var sys strings.Builder
	for _, p := range c.System {
		sys.WriteString(p.Text)
	}
	if sys.Len() > 0 {
		out = append(out, sys.String())
	}
	for _, m := range c.Messages {
		var b strings.Builder
		for _, p := range m.Parts {
			b.WriteString(p.Text)
			if p.ToolCall != nil {
				b.WriteString(p.ToolCall.Name)
				b.WriteString(p.ToolCall.Arguments)
			}
			if p.ToolResult != nil {
				for _, rp := range p.ToolResult.Content {
					b.WriteString(rp.Text)
				}
			}
		}
		out = append(out, b.String())
	}
	for _, t := range c.Tools {
		out = append(out, t.Name+t.Description+string(t.Parameters))
	}
	return out
}
