package adapters

import "net/http"

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

// FieldCacheTTL is the priced field a cache write that lives longer than
// the vendor's default (an hour, not five minutes) is named by. A model
// whose price has a 1-hour cache write price bills it as the vendor does
// (Usage.CacheWrite1hTokens), so the gateway relays it without
// allow_fields.
const FieldCacheTTL = "cache_control.ttl"

// ImageTokens is implemented by chat providers whose vendor documents how
// many prompt tokens one image can count for at most: the reservation
// holds that much per image part (not the size of its URL or data), so a
// request full of images cannot be admitted for less than the vendor will
// charge. model is the vendor's model name. Without it the gateway's
// default per image stands.
type ImageTokens interface {
	ImageTokens(model string) int64
}

// ChannelSettings is what a channel's configuration says of its upstream,
// resolved at load (placeholders replaced, {file.*} read): its keys and
// the model names the upstream knows (models and model_map targets).
type ChannelSettings struct {
	Name    string
	BaseURL string
	Keys    []string
	Models  []string
}

// ChannelProvisioner is implemented by providers whose key is not sent as
// it is (a cloud service account, exchanged for short-lived tokens) or
// whose wire depends on the channel's models: the gateway calls it once
// per channel at load, after Provision and before any request, and a
// refusal fails the load with its message. A family whose key travels
// as it is has nothing to check.
type ChannelProvisioner interface {
	ProvisionChannel(ch ChannelSettings) error
}

// BaseURLDefaulter is implemented by providers whose address follows from
// their own options (a cloud region) or whose vendor has one address (an
// OpenAI-compatible vendor's preset), so a channel may leave base_url
// unset; it is called after Provision. A family served from many
// addresses (OpenAI's wire on any server) has no default to give.
type BaseURLDefaulter interface {
	DefaultBaseURL() string
}

// TransportWrapper is implemented by providers that authenticate each
// call themselves (a short-lived token fetched, cached and refreshed once
// on a 401): the gateway sends the family's requests through the
// returned RoundTripper, which wraps the channel's own (its dial and
// header timeouts stay). A family whose key goes in NewRequest needs none.
type TransportWrapper interface {
	WrapTransport(base http.RoundTripper) http.RoundTripper
}
