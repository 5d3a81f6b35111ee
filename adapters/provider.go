package adapters

import (
	"context"
	"net/http"
)

// A channel's family is a Provider, and implements one capability
// interface for each thing its vendor does: ChatProvider (chat,
// completions, embeddings, count_tokens, responses; streamed or not),
// RerankProvider, MediaProvider (images and audio), RealtimeProvider and
// TaskProvider. The engine plans a request onto the channels whose family
// has the capability it needs and calls nothing else, so a family
// implements what it does and nothing more: a rerank-only family has no
// stream, a video family no chat.

// Provider is what every upstream family is, whatever it serves.
type Provider interface {
	// Type is the channel type that selects this provider.
	Type() string
	// DecodeError turns a non-2xx answer into an Error: the vendor's
	// error envelope, its status and reason, whose fault it is.
	DecodeError(status int, body []byte) *Error
}

// RequestIDReader is implemented by providers whose upstream names its own
// id for a request in a header of the vendor's choosing, so the usage row
// can be matched against the vendor's records. It is optional because most
// upstreams use the default the gateway reads without it, X-Request-Id.
type RequestIDReader interface {
	UpstreamRequestID(h http.Header) string
}

// Transporter is implemented by providers that answer without a network,
// such as the local demo model: the engine sends their requests through
// the returned RoundTripper instead of a channel's HTTP client. Every
// other family is reached over the network, hence optional.
type Transporter interface {
	Transport() http.RoundTripper
}

// ChatProvider is the chat capability: the conversation operations
// (Operation.Conversation), legacy completions, embeddings and
// count_tokens, answered whole or as an SSE stream the host reads with the
// family's StreamStep (DecodeStream).
type ChatProvider interface {
	// WireDialect names the client dialect this upstream speaks natively,
	// so the relay can pass bodies through, and the dialect its stream
	// frames are passed through in.
	WireDialect() string
	// NewRequest builds the upstream request. When req.Dialect equals
	// WireDialect it sends req.Raw with only the model replaced. A family
	// with other capabilities builds theirs here too (the operation says
	// which).
	NewRequest(ctx context.Context, up *Upstream, req *Request) (*http.Request, error)
	// DecodeResponse decodes a 2xx non-streamed body.
	DecodeResponse(req *Request, body []byte) (*Response, error)
	// NewStreamStep returns the step that reads one streamed answer to
	// req (its state is that stream's).
	NewStreamStep(req *Request) StreamStep
}

// RerankProvider is the rerank capability (OpRerank): documents ordered
// by relevance to a query.
type RerankProvider interface {
	// NewRequest builds the upstream request for req.Rerank.
	NewRequest(ctx context.Context, up *Upstream, req *Request) (*http.Request, error)
	// DecodeRerankResponse decodes a 2xx answer into Response.Rerank and
	// Usage, refusing a ranking that cannot be true (CheckRerankResults).
	DecodeRerankResponse(req *Request, body []byte) (*Response, error)
}
