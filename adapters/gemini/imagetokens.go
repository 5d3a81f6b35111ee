package gemini

import "github.com/caddy-model-gateway/gateway/adapters"

// imageTokens is what an image counts for on Gemini at the high media
// resolution, which is also Gemini 3's default for images: 1,120 tokens.
// Gemini 2 counts 258 tokens a 768 px tile, so an image of more than four
// tiles (larger than about 1536x1536) counts more: an operator whose
// clients send such images sets part_tokens.
const imageTokens = 1120

// ImageTokens implements adapters.ImageTokens.
func (Adapter) ImageTokens(string) int64 { return imageTokens }

var _ adapters.ImageTokens = Adapter{}
