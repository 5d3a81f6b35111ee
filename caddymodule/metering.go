package caddymodule

import (
	"net/http"
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
	n := tokenizer.CountChat(x.req.Model, engine.ChatTexts(x.req.Chat))
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
		u = engine.BilledUsage(x.req, x.usage, x.text.String(), x.tail, x.cut)
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
