package adapters

import "net/http"

// Optional interfaces: a dialect or decoder implements them when it can.

// PartialText is implemented by stream decoders that pass frames through
// without parsing them: it returns the completion text seen so far, so a
// stream that ended without usage (a client that left, an upstream that
// broke) can still be counted.
type PartialText interface {
	PartialText() string
}

// UsageSoFar is implemented by stream steps (and so by their decoders)
// that know usage the upstream sent before the event that reports it
// (Anthropic's message_start): the relay bills a stream cut before its
// end at least that.
type UsageSoFar interface {
	UsageSoFar() *Usage
}

// Pending is implemented by stream decoders that can tell whether another
// event has already arrived, so the relay flushes once per burst of events
// that came together instead of once per event, without ever holding an
// event back.
type Pending interface {
	Pending() bool
}

// Releaser is implemented by stream decoders that hold pooled buffers: the
// relay calls Release once it is done with the stream and its events.
type Releaser interface {
	Release()
}

// EventLimiter is implemented by stream decoders that can bound one
// upstream event's size: past n bytes Next returns ErrEventTooLarge rather
// than buffering on. The relay sets each channel's max_stream_event.
type EventLimiter interface {
	SetMaxEvent(n int)
}

// RequestIDReader is implemented by providers whose upstream names its own
// id for a request in a header of the vendor's choosing, so the usage row
// can be matched against the vendor's records. Without it the gateway
// reads X-Request-Id.
type RequestIDReader interface {
	UpstreamRequestID(h http.Header) string
}

// Fallback is implemented by a dialect that claims every path under its
// prefix that no other dialect claimed (OpenAI's /v1/): the gateway asks it
// last.
type Fallback interface {
	Fallback() bool
}

// CredentialHinter is implemented by dialects whose clients may put the key
// somewhere besides "Authorization: Bearer": the hint names those places in
// the error for a missing key.
type CredentialHinter interface {
	CredentialHint() string
}

// ModelPeeker is implemented by dialects that can read the model a body
// names without validating the rest, so the gateway answers an unknown
// model with 404 whatever else is wrong with the body (clients such as
// Claude Code tell "no such model" from "bad request" by it). It returns ""
// when the body names none.
type ModelPeeker interface {
	PeekModel(op Operation, body []byte, r *http.Request) string
}

// PricedFields is implemented by providers whose vendor charges more than
// the model's flat price for some fields a passthrough body may carry (a
// faster service tier, server-side tools such as web search, betas for a
// longer context or a longer-lived cache). The gateway refuses a request
// that carries one unless the channel allows it (allow_fields, allow_betas),
// so none is relayed unnoticed at the flat price.
type PricedFields interface {
	// PricedFields names the price-changing body fields and beta flags
	// req carries; nothing for a request translated from another dialect,
	// which cannot carry them.
	PricedFields(req *Request) (fields, betas []string)
}

// ImageTokens is implemented by providers whose vendor documents how many
// prompt tokens one image can count for at most: the reservation holds
// that much per image part (not the size of its URL or data), so a request
// full of images cannot be admitted for less than the vendor will charge.
// model is the vendor's model name.
type ImageTokens interface {
	ImageTokens(model string) int64
}
