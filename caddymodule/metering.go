package caddymodule

import (
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// countLocally answers count_tokens with the offline tokenizer.
func (h *Relay) countLocally(x *exchange) error {
	enc, ok := x.dialect.(adapters.TokenCountEncoder)
	if !ok {
		return x.fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "this dialect has no token counting endpoint"))
	}
	n := tokenizer.CountChat(x.req.Model, chatTexts(x.req.Chat))
	body := enc.EncodeTokenCount(n)
	x.status = http.StatusOK
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body) // a write error is the client gone
	return nil
}

// settle charges what the request used, by the upstream's counts or, when
// it reported none, by the local tokenizer, and records its usage row. It
// runs before the handler returns, so the row is in the usage writer's
// inflight log before the answer's last byte (a body's end, a stream's
// closing chunk) goes out.
func (h *Relay) settle(x *exchange) {
	req := x.req
	u := x.usage
	// a Realtime response is billed as its response.done reported it, a
	// media request by what it produced
	if x.channel != "" && req.Op != adapters.OpCountTokens && req.Op != adapters.OpRealtime && x.media == nil {
		u = billedUsage(x)
	}
	u = billing.Clamp(u)
	cost := int64(0)
	// counting tokens is free, whoever counts
	if x.price != nil && x.channel != "" && req.Op != adapters.OpCountTokens {
		if x.media != nil && req.Media != nil {
			cost = mediaCost(x)
			u.Estimated = x.usage.Estimated
		} else {
			cost = x.price.Cost(u)
		}
	}
	h.app.gate.Settle(time.Now(), billing.Admission{Ticket: x.ticket, Hold: x.hold}, u.PromptTokens+u.CompletionTokens, cost)
	took := time.Since(x.start)
	row := &store.UsageLog{
		CreatedAt:        x.start,
		UserID:           x.id.User.ID,
		TokenID:          x.id.Token.ID,
		Model:            truncate(req.Model, maxModelName),
		Channel:          x.channel,
		Endpoint:         x.r.URL.Path,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		CachedTokens:     u.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
		Cost:             cost,
		Status:           x.status,
		Estimated:        u.Estimated,
		Stream:           req.Stream,
		LatencyMS:        took.Milliseconds(),
		TTFBMS:           x.ttfb.Milliseconds(),
		Error:            truncate(x.errMsg, 1024),

		RequestID:         x.requestID,
		UpstreamRequestID: x.upstreamID,
	}
	// observed before the row is queued, so a committed row implies its
	// request is in the metrics
	h.app.metrics.observe(x, u, cost, took)
	if x.slot {
		h.app.db.writer.Write(row)
	} else {
		h.app.db.writer.WriteUnadmitted(row)
	}
}

// billedUsage is what a relayed request is billed on: the upstream's
// counts, or when it reported none, the local tokenizer's. A stream cut
// before its end event (the client left, the upstream broke) reported at
// most partial usage (Anthropic's message_start; of Gemini's partial
// usageMetadata its decoder keeps only the prompt count), so it is billed
// the larger of that usage, plus what was generated after it, and a local
// count of everything generated, reasoning included.
func billedUsage(x *exchange) adapters.Usage {
	u := x.usage
	if !u.Known() {
		return estimateUsage(x.req, x.text.String()+x.tail)
	}
	if !x.cut {
		return u
	}
	local := estimateUsage(x.req, x.text.String()+x.tail)
	after := tokenizer.Count(x.req.Model, x.tail)
	if c := u.CompletionTokens + after; c > local.CompletionTokens {
		local.CompletionTokens = c
	}
	local.PromptTokens = max(local.PromptTokens, u.PromptTokens)
	local.CachedTokens, local.CacheWriteTokens = u.CachedTokens, u.CacheWriteTokens
	local.ReasoningTokens = u.ReasoningTokens
	local.Estimated = local.CompletionTokens != u.CompletionTokens || local.PromptTokens != u.PromptTokens
	return local
}

// estimateUsage counts tokens locally for an upstream that reported none.
func estimateUsage(req *adapters.Request, completion string) adapters.Usage {
	u := adapters.Usage{Estimated: true}
	switch {
	case req.Chat != nil:
		u.PromptTokens = tokenizer.CountChat(req.Model, chatTexts(req.Chat))
	case req.Completion != nil:
		for _, p := range req.Completion.Prompt {
			u.PromptTokens += tokenizer.Count(req.Model, p)
		}
	case req.Embedding != nil:
		for _, in := range req.Embedding.Input {
			u.PromptTokens += tokenizer.Count(req.Model, in)
		}
	case req.Rerank != nil:
		u.PromptTokens = engine.RerankTokens(req.Model, req.Rerank)
	}
	u.CompletionTokens = tokenizer.Count(req.Model, completion)
	return u
}

// chatTexts lists the text of each message, system first, for counting.
func chatTexts(c *adapters.ChatRequest) []string {
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
