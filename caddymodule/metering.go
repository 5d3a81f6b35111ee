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
func (h *Relay) countLocally(x *engine.Exchange) error {
	enc, ok := x.Dialect.(adapters.TokenCountEncoder)
	if !ok {
		return x.Fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "this dialect has no token counting endpoint"))
	}
	n := tokenizer.CountChat(x.Req.Model, engine.ChatTexts(x.Req.Chat))
	body := enc.EncodeTokenCount(n)
	x.Status = http.StatusOK
	x.W.Header().Set("Content-Type", "application/json")
	x.W.WriteHeader(http.StatusOK)
	_, _ = x.W.Write(body) // a write error is the client gone
	return nil
}

// settle charges what the request used, by the upstream's counts or, when
// it reported none, by the local tokenizer, and records its usage row. It
// runs before the handler returns, so the row is in the usage writer's
// inflight log before the answer's last byte (a body's end, a stream's
// closing chunk) goes out.
func (h *Relay) settle(x *engine.Exchange) {
	req := x.Req
	u := x.Usage
	// a Realtime response is billed as its response.done reported it, a
	// media request by what it produced
	if x.Channel != "" && req.Op != adapters.OpCountTokens && req.Op != adapters.OpRealtime && x.Media == nil {
		u = engine.BilledUsage(x.Req, x.Usage, x.Text.String(), x.Tail, x.Cut)
	}
	u = billing.Clamp(u)
	cost := int64(0)
	// counting tokens is free, whoever counts
	if x.Price != nil && x.Channel != "" && req.Op != adapters.OpCountTokens {
		if x.Media != nil && req.Media != nil {
			cost = mediaCost(x)
			u.Estimated = x.Usage.Estimated
		} else {
			cost = x.Price.Cost(u)
		}
	}
	h.app.gate.Settle(time.Now(), billing.Admission{Ticket: x.Ticket, Hold: x.Hold}, u.PromptTokens+u.CompletionTokens, cost)
	took := time.Since(x.Start)
	row := &store.UsageLog{
		CreatedAt:        x.Start,
		UserID:           x.ID.User.ID,
		TokenID:          x.ID.Token.ID,
		Model:            truncate(req.Model, maxModelName),
		Channel:          x.Channel,
		Endpoint:         x.R.URL.Path,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		CachedTokens:     u.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens,
		Cost:             cost,
		Status:           x.Status,
		Estimated:        u.Estimated,
		Stream:           req.Stream,
		LatencyMS:        took.Milliseconds(),
		TTFBMS:           x.TTFB.Milliseconds(),
		Error:            truncate(x.ErrMsg, 1024),

		RequestID:         x.RequestID,
		UpstreamRequestID: x.UpstreamID,
	}
	// observed before the row is queued, so a committed row implies its
	// request is in the metrics
	h.app.metrics.observe(x, u, cost, took)
	if x.Slot {
		h.app.db.writer.Write(row)
	} else {
		h.app.db.writer.WriteUnadmitted(row)
	}
}
