package caddymodule

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// maxChoices bounds n / candidateCount / best_of in a reservation.
const maxChoices = 128

// reservation is the request's worst-case cost: its prompt estimate at
// the input price and its output allowance, once per choice, at the output
// price. A request without an output limit of its own gets one, sent on to
// the upstream as its limit: the model's max_output (default_max_tokens
// for a priced model without one), lowered to what the caller's quota
// covers. A free model without max_output keeps the channel's default.
func (h *Relay) reservation(x *exchange) (int64, *adapters.Error) {
	a, req, price := h.app, x.req, x.price
	switch {
	case req.Media != nil:
		return h.mediaReservation(x)
	case req.Rerank != nil:
		return rerankReservation(req.Rerank, price), nil
	case req.Op == adapters.OpRealtime:
		return h.realtimeReservation(price), nil
	}
	prompt, parts := promptEstimate(req)
	if parts > 0 {
		prompt = billing.AddSat(prompt, billing.MulSat(parts, a.imageTokens(req.Model)))
	}
	if !req.Op.Conversation() && req.Op != adapters.OpCompletion {
		return price.Reservation(prompt, 0), nil
	}
	limit, choices := outputLimit(req)
	if limit > 0 {
		return price.Reservation(prompt, billing.MulSat(limit, choices)), nil
	}
	want := price.MaxOutput
	if want <= 0 {
		if price.Free {
			// nothing to bound: the channel's own default stands
			return 0, nil
		}
		want = a.DefaultMaxTokens
	}
	room := a.db.ledger.Room(x.id.User, x.id.Token)
	allowance := price.Affordable(prompt, want, choices, room)
	if allowance <= 0 {
		if room <= 0 {
			return 0, quotaError("your quota is used up: top up your account and try again")
		}
		return 0, quotaError("your remaining quota does not cover even this request's prompt: top up your account, or ask for a key with a higher limit")
	}
	req.OutputAllowance = allowance
	return price.Reservation(prompt, billing.MulSat(allowance, choices)), nil
}

// outputLimit is the client's own output limit per choice (0: none) and
// how many choices it asked for (n, candidateCount, best_of).
func outputLimit(req *adapters.Request) (limit, choices int64) {
	var max, n *int64
	switch {
	case req.Chat != nil:
		max, n = req.Chat.MaxTokens, req.Chat.N
	case req.Completion != nil:
		max, n = req.Completion.MaxTokens, req.Completion.Choices
	}
	choices = 1
	if n != nil && *n > 1 {
		choices = min(*n, maxChoices)
	}
	if max != nil && *max > 0 {
		limit = *max
	}
	return limit, choices
}

// promptEstimate guesses the prompt's tokens from its size (about four
// bytes a token) rather than tokenizing it, to keep admission cheap; an
// image, audio or file part is not counted by the size of its URL or data:
// it returns how many there are, for the caller to count at what the
// model's vendor documents.
func promptEstimate(req *adapters.Request) (textTokens, parts int64) {
	size := int64(len(req.Raw))
	if req.Chat != nil {
		for _, m := range req.Chat.Messages {
			for _, p := range m.Parts {
				switch p.Type {
				case adapters.PartText, adapters.PartToolCall, adapters.PartToolResult, adapters.PartThinking:
					continue
				case adapters.PartImage:
					if p.Image != nil {
						size -= int64(len(p.Image.URL)) + int64(len(p.Image.Data))*4/3
					}
				}
				parts++
			}
		}
	}
	return max(size, 0) / 4, parts
}

// defaultPartTokens is what an image part reserves on a model none of
// whose channels documents more: Anthropic's most for one image.
const defaultPartTokens = 1600

// imageTokens is what one image part of a prompt for model reserves: the
// operator's part_tokens when set, else the most any of the model's
// channels' vendors documents for one image.
func (a *App) imageTokens(model string) int64 {
	if a.PartTokens > 0 {
		return a.PartTokens
	}
	if n, ok := a.partTokens[model]; ok {
		return n
	}
	return defaultPartTokens
}

// notePartTokens records what an image costs on a channel serving model,
// keeping the most over the model's channels (a request may fail over to
// any of them).
func (a *App) notePartTokens(model string, n int64) {
	if n > a.partTokens[model] {
		a.partTokens[model] = n
	}
}
