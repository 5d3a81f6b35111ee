package anthropic

import "github.com/caddy-model-gateway/gateway/adapters"

// imageTokens is the most an image counts for on Anthropic's API: an image
// is scaled to at most about 1.15 megapixels and costs width x height /
// 750 tokens, about 1,600 (the vision guide's table).
const imageTokens = 1600

// ImageTokens implements adapters.ImageTokens.
func (Adapter) ImageTokens(string) int64 { return imageTokens }

var _ adapters.ImageTokens = Adapter{}
