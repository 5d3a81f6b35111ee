package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

// Media endpoints (image generations and edits, speech, transcriptions)
// are served by relayhttp; their Caddyfile options and prices are here.

// defaultMaxUploadSize is max_upload_size's default: OpenAI's own limit
// for an audio file.
const defaultMaxUploadSize = 25 << 20

// defaultMaxInflightUploads is max_inflight_uploads' default.
const defaultMaxInflightUploads = 1 << 30

// parseImagePrice reads `image [<size> [<quality>]] <usd>`; "*" stands for
// any size or quality.
func parseImagePrice(d *caddyfile.Dispenser, model string, pc *PriceConfig) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 3 {
		return d.Errf("price %s: image takes [<size> [<quality>]] <usd per image>, e.g. 'image 1024x1024 hd 0.08'", model)
	}
	ic := ImagePriceConfig{Price: args[len(args)-1]}
	if len(args) > 1 && args[0] != "*" {
		ic.Size = args[0]
	}
	if len(args) > 2 && args[1] != "*" {
		ic.Quality = args[1]
	}
	if _, err := billing.ParseUSD(ic.Price); err != nil {
		return d.Errf("price %s: image: %v", model, err)
	}
	pc.Images = append(pc.Images, ic)
	return nil
}
