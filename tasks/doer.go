package tasks

import (
	"io"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// boundedDoer sends through a channel's client and cuts an answer longer
// than max with bodies.ErrTooLarge, so an upstream that lies cannot grow
// memory.
type boundedDoer struct {
	c   *http.Client
	max int64
}

func (d boundedDoer) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(r)
	if err != nil {
		return nil, err
	}
	resp.Body = cappedBody{Reader: &bodies.Capped{R: resp.Body, N: d.max}, Closer: resp.Body}
	return resp, nil
}

type cappedBody struct {
	io.Reader
	io.Closer
}

// exchange is a submit's doer: it records what the adapter's calls to the
// upstream came to, so that a failure is classified as an answer (with
// its Retry-After) or as no answer at all.
type exchange struct {
	do adapters.Doer
	// sent: a request went out
	sent bool
	// header is the last answer's header
	header http.Header
	// err is the last call's error when it got no answer
	err error
	// trace is the traced submit (nil: untraced): each request carries
	// its attempt's traceparent
	trace *tracing.Request
}

func (x *exchange) Do(r *http.Request) (*http.Response, error) {
	x.sent = true
	if x.trace != nil {
		x.trace.Upstream(r.Method, r.URL, r.Header)
	}
	resp, err := x.do.Do(r)
	x.err = err
	if err == nil {
		x.header = resp.Header
	}
	return resp, err
}
