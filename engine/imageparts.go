package engine

// DefaultPartTokens is what an image part reserves on a model none of
// whose channels documents more: Anthropic's most for one image.
const DefaultPartTokens = 1600

// ImageParts is what one image part of a prompt reserves, by model (an
// Engine's PartTokens). Its models are noted while the channels are
// built, and only read after.
type ImageParts struct {
	// Fixed, when above zero, is what an image part reserves on every
	// model: the operator's part_tokens.
	Fixed   int64
	byModel map[string]int64
}

// Tokens is what one image part of a prompt for model reserves: Fixed
// when set, else the most any of the model's channels' vendors documents
// for one image.
func (p *ImageParts) Tokens(model string) int64 {
	if p.Fixed > 0 {
		return p.Fixed
	}
	if n, ok := p.byModel[model]; ok {
		return n
	}
	return DefaultPartTokens
}

// Note records what an image costs on a channel serving model, keeping
// the most over the model's channels (a request may fail over to any of
// them).
func (p *ImageParts) Note(model string, n int64) {
	if p.byModel == nil {
		p.byModel = map[string]int64{}
	}
	if n > p.byModel[model] {
		p.byModel[model] = n
	}
}
