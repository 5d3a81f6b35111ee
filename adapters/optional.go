package adapters

// Optional interfaces: each is asked of a dialect or a provider only where
// some families have the thing and others truly do not.

// Fallback is implemented by a dialect that claims every path under its
// prefix that no other dialect claimed (OpenAI's /v1/): the gateway asks it
// last. Only one dialect can be the fallback.
type Fallback interface {
	Fallback() bool
}

// CredentialHinter is implemented by dialects whose clients may put the key
// somewhere besides "Authorization: Bearer": the hint names those places in
// the error for a missing key. A Bearer-only dialect needs no hint.
type CredentialHinter interface {
	CredentialHint() string
}

// PricedFields is implemented by chat providers whose vendor charges more
// than the model's flat price for some fields a passthrough body may carry
// (a faster service tier, server-side tools such as web search, betas for
// a longer context or a longer-lived cache). The gateway refuses a request
// that carries one unless the channel allows it (allow_fields,
// allow_betas), so none is relayed unnoticed at the flat price. A vendor
// with no such field has nothing to say.
type PricedFields interface {
	// PricedFields names the price-changing body fields and beta flags
	// req carries; nothing for a request translated from another dialect,
	// which cannot carry them.
	PricedFields(req *Request) (fields, betas []string)
}

// ImageTokens is implemented by chat providers whose vendor documents how
// many prompt tokens one image can count for at most: the reservation
// holds that much per image part (not the size of its URL or data), so a
// request full of images cannot be admitted for less than the vendor will
// charge. model is the vendor's model name. Without it the gateway's
// default per image stands.
type ImageTokens interface {
	ImageTokens(model string) int64
}

// BaseURLDefault is implemented by providers whose vendor has one address
// (an OpenAI-compatible vendor's preset): a channel of theirs may leave
// base_url out. A family served from many addresses (OpenAI's wire on any
// server, a cloud resource) has no default to give.
type BaseURLDefault interface {
	DefaultBaseURL() string
}
