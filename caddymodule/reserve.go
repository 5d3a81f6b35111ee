package caddymodule

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
