package engine

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// MaxChoices bounds n / candidateCount / best_of in a reservation.
const MaxChoices = 128

// TokenReservation is a token-billed request's worst-case cost: its
// prompt estimate at the input price and its output allowance, once per choice, at the output
// price. A price with tiers by prompt length is taken at the tier the
// prompt could reach (PromptReach), not the one its estimate is in: the
// estimate may fall short of the real count, which settles at its tier. A request without an output limit of its own gets one, sent on to
// the upstream as its limit: the model's max_output (default_max_tokens
// for a priced model without one), lowered to what the caller's quota
// covers. A free model without max_output keeps the channel's default.
//
// partTokens is what one image part of the prompt reserves; defaultMax is
// the output allowance of a priced model without max_output; room is what
// the caller's quota still covers, asked only when it bounds the answer.
func TokenReservation(req *adapters.Request, price *billing.Price, partTokens, defaultMax int64, room func() int64) (int64, *adapters.Error) {
	prompt, parts := PromptEstimate(req)
	if parts > 0 {
		prompt = billing.AddSat(prompt, billing.MulSat(parts, partTokens))
	}
	if len(price.Tiers) > 0 {
		at := price.At(max(prompt, PromptReach(req, parts, partTokens)))
		price = &at
	}
	if !req.Op.Conversation() && req.Op != adapters.OpCompletion {
		return price.Reservation(prompt, 0), nil
	}
	limit, choices := OutputLimit(req)
	if limit > 0 {
		return price.Reservation(prompt, billing.MulSat(limit, choices)), nil
	}
	want := price.MaxOutput
	if want <= 0 {
		if price.Free {
			// nothing to bound: the channel's own default stands
			return 0, nil
		}
		want = defaultMax
	}
	left := room()
	allowance := price.Affordable(prompt, want, choices, left)
	if allowance <= 0 {
		if left <= 0 {
			return 0, QuotaError("your quota is used up: top up your account and try again")
		}
		return 0, QuotaError("your remaining quota does not cover even this request's prompt: top up your account, or ask for a key with a higher limit")
	}
	req.OutputAllowance = allowance
	return price.Reservation(prompt, billing.MulSat(allowance, choices)), nil
}

// OutputLimit is the client's own output limit per choice (0: none) and
// how many choices it asked for (n, candidateCount, best_of).
func OutputLimit(req *adapters.Request) (limit, choices int64) {
	var max, n *int64
	switch {
	case req.Chat != nil:
		max, n = req.Chat.MaxTokens, req.Chat.N
	case req.Completion != nil:
		max, n = req.Completion.MaxTokens, req.Completion.Choices
	}
	choices = 1
	if n != nil && *n > 1 {
		choices = min(*n, MaxChoices)
	}
	if max != nil && *max > 0 {
		limit = *max
	}
	return limit, choices
}

// PromptReach is the most prompt tokens the request's body can hold: a
// token is at least one byte of text, so the text's bytes (its image
// data left out, as PromptEstimate leaves it) plus what its parts
// reserve. Context the body only points at (a previous response, a
// vendor-side cache) is not in it: that settles at the tier it reached.
func PromptReach(req *adapters.Request, parts, partTokens int64) int64 {
	text, _ := promptBytes(req)
	return billing.AddSat(text, billing.MulSat(parts, partTokens))
}

// PromptEstimate guesses the prompt's tokens from its size (about four
// bytes a token) rather than tokenizing it, to keep admission cheap; an
// image, audio or file part is not counted by the size of its URL or data:
// it returns how many there are, for the caller to count at what the
// model's vendor documents.
func PromptEstimate(req *adapters.Request) (textTokens, parts int64) {
	size, parts := promptBytes(req)
	return size / 4, parts
}

// promptBytes is the body's size without its image data, and how many
// parts it has that are not text.
func promptBytes(req *adapters.Request) (size, parts int64) {
	size = int64(len(req.Raw))
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
	return max(size, 0), parts
}
