package tasks

import (
	"errors"
	"io"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// boundedDoer sends through a channel's client and cuts an answer longer
// than max with an error, so an upstream that lies cannot grow memory.
type boundedDoer struct {
	c   *http.Client
	max int64
}

func (d boundedDoer) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{rc: resp.Body, left: d.max + 1}
	return resp, nil
}

// ErrAnswerTooLarge ends an upstream answer longer than the channel's
// max_response_body.
var ErrAnswerTooLarge = errors.New("the upstream's answer is larger than the channel's max_response_body")

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

// Read reads at most max+1 bytes: the one past max is the error.
func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n - 1, ErrAnswerTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

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
}

func (x *exchange) Do(r *http.Request) (*http.Response, error) {
	x.sent = true
	resp, err := x.do.Do(r)
	x.err = err
	if err == nil {
		x.header = resp.Header
	}
	return resp, err
}
