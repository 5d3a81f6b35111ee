package engine

import (
	"net/http"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// RowWriter queues usage rows (billing.Writer): Write for a request that
// took a queue slot at admission, WriteUnadmitted for one that did not.
type RowWriter interface {
	Write(row *store.UsageLog)
	WriteUnadmitted(row *store.UsageLog)
}

// Meter records a settled request in the metrics; the server layer
// implements it.
type Meter interface {
	Observe(x *Exchange, u adapters.Usage, cost int64, took time.Duration)
}

// billedUsage is what the request is billed on: a Realtime response as
// its response.done reported it, a media request by what it produced,
// others by the upstream's counts or, without them, the local tokenizer.
func (x *Exchange) billedUsage() adapters.Usage {
	u := x.Usage
	if x.Channel != "" && x.Req.Op != adapters.OpCountTokens && x.Req.Op != adapters.OpRealtime && x.Media == nil {
		u = BilledUsage(x.Req, x.Usage, x.Text.String(), x.Tail, x.Cut)
	}
	return billing.Clamp(u)
}

// CountLocally answers count_tokens with the offline tokenizer.
func CountLocally(x *Exchange) error {
	enc, ok := x.Dialect.(adapters.TokenCountEncoder)
	if !ok {
		return x.Fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "this dialect has no token counting endpoint"))
	}
	n := tokenizer.CountChat(x.Req.Model, ChatTexts(x.Req.Chat))
	body := enc.EncodeTokenCount(n)
	x.Status = http.StatusOK
	x.W.Header().Set("Content-Type", "application/json")
	x.W.WriteHeader(http.StatusOK)
	_, _ = x.W.Write(body) // a write error is the client gone
	return nil
}

// Refuse answers x with err after settling it: the refused request's row
// is in the usage writer's inflight log before the answer is written. A
// refusal answered before the request's body is read is flushed at once,
// and the connection then lingers (bodies.Linger) before the handler
// returns; with the error's length declared the client has the whole
// answer at the flush, so settling when the handler returns would be too
// late for a process killed meanwhile. Settle runs once, so the handler's
// deferred Settle then does nothing.
func (e *Engine) Refuse(x *Exchange, err *adapters.Error) error {
	x.Status, x.ErrMsg = err.Status, err.Message
	e.Settle(x)
	return x.Fail(err)
}

// Settle charges what the request used, by the upstream's counts or, when
// it reported none, by the local tokenizer, and records its usage row. It
// runs before the handler returns, so the row is in the usage writer's
// inflight log before the answer's last byte (a body's end, a stream's
// closing chunk) goes out.
func (e *Engine) Settle(x *Exchange) {
	if x.settled {
		return
	}
	x.settled = true
	req := x.Req
	u := x.billedUsage()
	cost, tier := int64(0), int64(0)
	// counting tokens is free, whoever counts
	if x.Price != nil && x.Channel != "" && req.Op != adapters.OpCountTokens {
		if x.Media != nil && req.Media != nil {
			var estimated bool
			cost, estimated = MediaCost(req, x.Price, x.Usage, x.Media.Usage, x.Media.Reserved)
			u.Estimated = x.Usage.Estimated || estimated
		} else {
			cost = x.Price.Cost(u)
			tier = x.Price.TierAbove(u.PromptTokens)
		}
	}
	tokens := u.PromptTokens + u.CompletionTokens
	var saved int64
	if x.CacheHit() {
		// a hit bills its configured share of what the answer cost on
		// its miss, at today's price, and no upstream tokens
		if x.Price != nil {
			full := x.Price.Cost(u)
			cost = e.Cache.Charge(full)
			saved = full - cost
		}
		tokens = 0
	}
	if x.cache != nil && e.Cache.Observer != nil {
		e.Cache.Observer.Used(x.CacheHit(), saved)
	}
	// a plan that pays is charged its multiplier for the model
	cost = x.Hold.Windows.Charge(cost)
	e.Gate.Settle(time.Now(), billing.Admission{Ticket: x.Ticket, Hold: x.Hold}, tokens, cost)
	took := time.Since(x.Start)
	row := &store.UsageLog{
		CreatedAt:        x.Start,
		UserID:           x.ID.User.ID,
		TokenID:          x.ID.Token.ID,
		Model:            Truncate(req.Model, MaxModelName),
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
		Error:            Truncate(x.ErrMsg, 1024),

		RequestID:         x.RequestID,
		UpstreamRequestID: x.UpstreamID,
		Windows:           x.Hold.Windows.WindowIDs(),
		Plan:              x.Hold.Windows.PaidBy(),
		CacheHit:          x.CacheHit(),
		CacheSaved:        saved,
		PriceTier:         tier,
	}
	if tr := e.tracer(x); tr != nil {
		e.traceSettled(tr, x, u, cost)
		row.TraceID = tr.TraceID()
	}
	// observed before the row is queued, so a committed row implies its
	// request is in the metrics
	e.Meter.Observe(x, u, cost, took)
	if x.Slot {
		e.Rows.Write(row)
	} else {
		e.Rows.WriteUnadmitted(row)
	}
}
