package engine

import (
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Admit checks the model against the token and the configuration and
// reserves its worst-case cost.
func (e *Engine) Admit(x *Exchange) *adapters.Error {
	req := x.Req
	if e := ModelAllowed(e.Gate.Models(), x.ID.Token, req.Model); e != nil {
		return e
	}
	if !e.Channels.Has(req.Model) {
		return UnknownModel(req.Model)
	}
	price, ok := e.Prices.Get(req.Model)
	if !ok {
		return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "model_price_missing",
			Message: "the model " + req.Model + " has no price configured, so it cannot be billed: the operator must add 'price " + req.Model + " { ... }' (or mark it free) in the gateway's Caddyfile"}
	}
	if price.TaskOnly() {
		return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "task_model",
			Message: "the model " + req.Model + " runs as a task: submit it to POST /api/generate/submit and poll GET /api/generate/status/{task_id}"}
	}
	x.Price = price
	ask := billing.Ask{User: x.ID.User, Token: x.ID.Token, Slot: true, Model: req.Model, Scaled: true}
	if req.Op != adapters.OpCountTokens {
		ask.Reserve = func() (int64, error) {
			amount, refused := e.Reservation(x)
			if refused != nil {
				return 0, refused
			}
			return amount, nil
		}
	}
	ad, err := e.Gate.Admit(time.Now(), ask)
	x.Ticket, x.Hold, x.Slot = ad.Ticket, ad.Hold, ad.Slot
	if err != nil {
		return AdmissionError(err, x.W.Header(),
			"request (it may cost up to %s): top up your account, lower max_tokens, or ask for a key with a higher limit")
	}
	BudgetHeaders(x.W.Header(), x.Hold.Windows)
	return nil
}

// Precheck refuses, before the body is read, a request its key could
// not make whatever the body says: a rate limit with no room, or nothing
// left to pay with when every model the key may use costs something (a
// free model, or counting tokens, costs nothing, so an empty balance may
// still ask for it). Admit decides the rest once the body is decoded.
func (e *Engine) Precheck(x *Exchange) *adapters.Error {
	t := x.ID.Token
	mayBeFree := func() bool {
		if x.Req.Op == adapters.OpCountTokens {
			return true
		}
		groups := e.Gate.Models()
		for model, p := range e.Prices.All() {
			if costless(p) && groups.Allows(t.Models, model) && e.Channels.Has(model) {
				return true
			}
		}
		return false
	}
	if err := e.Gate.Precheck(time.Now(), x.ID.User, t, mayBeFree); err != nil {
		return AdmissionError(err, x.W.Header(), "request")
	}
	return nil
}

// costless reports whether a model's price charges nothing: free, or
// without a single price set.
func costless(p *billing.Price) bool {
	if p.Free {
		return true
	}
	zero := func(v *int64) bool { return v == nil || *v == 0 }
	return p.Input == 0 && p.Output == 0 && p.Request == 0 && p.SearchUnit == 0 &&
		zero(p.CachedInput) && zero(p.CacheWrite) && zero(p.CacheWrite1h) && len(p.Tiers) == 0 && zero(p.AudioInput) && zero(p.AudioOutput) && zero(p.ImageInput) &&
		len(p.Images) == 0 && p.AudioSecond == 0 && p.Characters == 0 && p.Task == 0 && p.VideoSecond == 0
}

// ModelAllowed is the 403 for a key limited to other models, nil when the
// key may use model.
func ModelAllowed(groups billing.ModelGroups, t *store.Token, model string) *adapters.Error {
	if groups.Allows(t.Models, model) {
		return nil
	}
	return &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_allowed",
		Message: "this API key may not use model " + model + "; it may use: " + strings.Join(t.Models, ", ")}
}

// UnknownModel is the 404 for a model no channel serves.
func UnknownModel(model string) *adapters.Error {
	return &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
		Message: "the model " + model + " does not exist on this gateway: GET /v1/models lists the models your key may use"}
}

// Reservation is the request's worst-case cost, by what it is billed on.
func (e *Engine) Reservation(x *Exchange) (int64, *adapters.Error) {
	req, price := x.Req, x.Price
	switch {
	case req.Media != nil:
		// a transcription keeps it, to charge when the upstream does not
		// say how long the audio was
		amount, refused := MediaReservation(req, price, e.PartTokens(req.Model))
		if x.Media != nil {
			x.Media.Reserved = amount
		}
		return amount, refused
	case req.Rerank != nil:
		return RerankReservation(req.Rerank, price), nil
	case req.Op == adapters.OpRealtime:
		return e.RealtimeReservation(price, 0), nil // the first response: the conversation is empty
	}
	return TokenReservation(req, price, e.PartTokens(req.Model), e.DefaultMaxTokens,
		func() int64 { return e.Gate.Room(x.ID.User, x.ID.Token, req.Model) })
}

// RealtimeOutput is the most tokens one Realtime response may write: the
// model's max_output, default_max_tokens without one.
func (e *Engine) RealtimeOutput(price *billing.Price) int64 {
	if price.MaxOutput > 0 {
		return price.MaxOutput
	}
	return e.DefaultMaxTokens
}

// RealtimeReservation is what one Realtime response holds while it runs:
// its output cap of audio out, and as input the larger of the cap and the
// conversation so far (context: the tokens in and out of the session's
// last response, which the next one reads again), all audio, the dearest
// tokens. The output cannot exceed it; what the client adds to the
// conversation between two responses beyond that is charged in full at
// the response's end.
func (e *Engine) RealtimeReservation(price *billing.Price, context int64) int64 {
	n := e.RealtimeOutput(price)
	in := max(n, context)
	return price.Cost(adapters.Usage{PromptTokens: in, AudioPromptTokens: in, CompletionTokens: n, AudioCompletionTokens: n})
}

// RealtimeInputReservation is what a Realtime response that reads context
// tokens of conversation (priced as audio, the dearest) and in besides
// may cost: never less than RealtimeReservation's floor, its output cap
// read as audio.
func (e *Engine) RealtimeInputReservation(price *billing.Price, context int64, in adapters.RealtimeInput) int64 {
	n := e.RealtimeOutput(price)
	read := context + in.Text + in.Audio
	cost := price.Cost(adapters.Usage{PromptTokens: read, AudioPromptTokens: context + in.Audio, CompletionTokens: n, AudioCompletionTokens: n})
	return max(cost, e.RealtimeReservation(price, 0))
}
