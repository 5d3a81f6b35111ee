package openai

import (
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// OpenAI's vision guide counts an image at high detail after scaling it to
// fit 2048x2048 and its short side to 768 px: at most 2x4 tiles of 512 px.
const (
	// tile models (gpt-4o, gpt-4.1, gpt-5, o-series): at most 85 + 8 x 170;
	// the others' base and tile costs are lower
	tileImageTokens = 85 + 8*170
	// gpt-4o-mini bills an image as 2833 + 5667 per tile, so that an image
	// costs what it costs on gpt-4o
	miniTileImageTokens = 2833 + 8*5667
	// patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): at most
	// 1536 patches of 32 px, times a model's multiplier, 2.46 at most
	patchImageTokens = (1536*246 + 99) / 100 // rounded up
)

// ImageTokens implements adapters.ImageTokens.
func (Adapter) ImageTokens(model string) int64 { return ImageTokensFor(model) }

// ImageTokensFor is the most tokens OpenAI documents for one image on
// model (for an OpenAI-compatible upstream such as Azure's, by the name of
// its deployment when that names the model, else a tile model's).
func ImageTokensFor(model string) int64 {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "gpt-4o-mini"):
		return miniTileImageTokens
	case strings.Contains(m, "-mini") || strings.Contains(m, "-nano"):
		return patchImageTokens
	}
	return tileImageTokens
}

var _ adapters.ImageTokens = Adapter{}
