package adapters

// TokenCountEncoder is implemented by dialects with a token-counting
// endpoint (Anthropic's count_tokens, Gemini's countTokens); a dialect
// without one never decodes OpCountTokens. The relay uses it when it
// counted locally, because the channel is of another family.
type TokenCountEncoder interface {
	EncodeTokenCount(n int64) []byte
}
