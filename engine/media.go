package engine

import (
	"net/http"
	"unicode/utf8"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// transcriptionBytesPerSecond is the audio bitrate a transcription's
// reservation assumes: 16 kbit/s, as low as speech is usually encoded, so
// the reservation covers the audio's length unless it is encoded lower
// still (then the upstream's reported length is charged all the same).
const transcriptionBytesPerSecond = 2000

// MediaReservation is a media request's worst case: n images at the
// dearest price their size and quality can have (plus the prompt and
// input images at the token prices of a model billed by tokens); the
// input's characters; the audio's length at a low speech bitrate.
//
// imageTokens is what one input image reserves at the token prices.
func MediaReservation(req *adapters.Request, price *billing.Price, imageTokens int64) (int64, *adapters.Error) {
	m := req.Media
	if price.Free {
		return 0, nil
	}
	switch req.Op {
	case adapters.OpImage:
		if !price.HasImagePrice() {
			return 0, PriceMissing(req.Model, "an image price ('image <usd>' or 'image <size> <quality> <usd>')")
		}
		each, ok := price.ImagePriceFor(m.Size, m.Quality)
		if !ok {
			if price.Output <= 0 {
				return 0, adapters.BadRequest("the model %s has no price for images of size %q and quality %q on this gateway: ask for a size and quality it prices", req.Model, m.Size, m.Quality)
			}
			each = 0
		}
		images := int64(0)
		if m.Form != nil {
			images = int64(len(m.Form.Files("image", "image[]", "mask")))
		}
		prompt := int64(len(m.Prompt))/4 + 1
		tokens := price.ImageTokenCost(prompt, billing.MulSat(images, imageTokens), 0)
		return billing.AddSat(price.ImageCost(m.N, each), tokens), nil
	case adapters.OpSpeech:
		if price.Characters <= 0 {
			return 0, PriceMissing(req.Model, "a speech price ('characters <usd per million characters>')")
		}
		return price.CharacterCost(int64(utf8.RuneCountInString(m.Input))), nil
	default:
		if price.AudioSecond <= 0 && price.Input <= 0 {
			return 0, PriceMissing(req.Model, "an audio price ('audio_second <usd>')")
		}
		var size int64
		if m.Form != nil {
			for _, f := range m.Form.Files("file") {
				size += f.Size
			}
		}
		seconds := max(size/transcriptionBytesPerSecond, 1)
		return price.AudioCost(billing.MulSat(seconds, 1000)), nil
	}
}

// PriceMissing refuses a request its model has no price for.
func PriceMissing(model, what string) *adapters.Error {
	return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "model_price_missing",
		Message: "the model " + model + " has no " + what + " configured, so it cannot be billed: the operator must add it to 'price " + model + " { ... }' in the gateway's Caddyfile"}
}

// MediaCost is what a relayed media request is charged: the images
// produced (by tokens when the model reports them and is priced by
// tokens, else by size and quality), the characters spoken, the seconds
// of audio transcribed (by tokens for a model that reports them).
//
// u and mu are what the upstream reported; reserved is the reservation,
// which a transcription is charged when the upstream does not say how long
// the audio was (estimated is then true).
func MediaCost(req *adapters.Request, price *billing.Price, u adapters.Usage, mu adapters.MediaUsage, reserved int64) (cost int64, estimated bool) {
	m := req.Media
	switch req.Op {
	case adapters.OpImage:
		if u.Known() && (price.Output > 0 || price.Input > 0) {
			text := max(u.PromptTokens-mu.ImageInputTokens, 0)
			return price.ImageTokenCost(text, mu.ImageInputTokens, u.CompletionTokens), false
		}
		size, quality := m.Size, m.Quality
		if mu.Size != "" {
			size = mu.Size
		}
		if mu.Quality != "" {
			quality = mu.Quality
		}
		each, _ := price.ImagePriceFor(size, quality)
		return price.ImageCost(mu.Images, max(each, 0)), false
	case adapters.OpSpeech:
		return price.CharacterCost(int64(utf8.RuneCountInString(m.Input))), false
	default:
		switch {
		case mu.AudioKnown && price.AudioSecond > 0:
			return price.AudioCost(mu.AudioMillis), false
		case u.Known():
			return price.Cost(u), false // a model billed by audio and text tokens
		}
		// the upstream did not say how long the audio was: the
		// reservation's estimate stands
		return reserved, true
	}
}
