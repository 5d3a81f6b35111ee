package adapters

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// NewJSONRequest builds an upstream POST of a JSON body. A streamed call
// asks for text/event-stream. The vendor adds its key where its API wants
// it (never from the client's request, whose headers are not copied).
// The body is held as ForgetBody says (SentBody).
func NewJSONRequest(ctx context.Context, url string, body []byte, stream bool) (*http.Request, error) {
	var r io.Reader
	if len(body) < forgetAt {
		r = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	if r == nil {
		SetBody(hr, body)
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}

// forgetAt is the size from which an upstream request's body is let go of
// once sent (SetBody). A smaller one stays a bytes.Reader, which net/http
// knows is in memory and sends in one write with the headers; it flushes
// the headers apart for a body of another type, which for a body past its
// write buffer (1 KB, bounds.go) costs nothing it did not cost already.
const forgetAt = 4 << 10

// SetBody makes body hr's body, as http.NewRequest does for a
// bytes.Reader, except that the bytes are let go once sent: the transport
// keeps a request until its answer's body ends, and a stream's answer
// lasts minutes while its prompt may be hundreds of KB, thousands of
// streams at once. The body drops them when read to its end; GetBody,
// which rewinds it for the transport's retry on a connection found dead,
// drops them at ForgetBody.
func SetBody(hr *http.Request, body []byte) {
	hr.ContentLength = int64(len(body))
	if len(body) == 0 {
		hr.Body, hr.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
		return
	}
	kept := &keptBody{b: body}
	hr.Body = &sentBody{b: body, kept: kept}
	hr.GetBody = func() (io.ReadCloser, error) {
		if kept.b == nil {
			return nil, errBodyForgotten
		}
		return &sentBody{b: kept.b, kept: kept}, nil
	}
}

// ForgetBody lets go of hr's body for rewinding, once hr's round trip is
// over (http.Client.Do returned): nothing sends it again. A request whose
// body SetBody did not make is left as it is.
func ForgetBody(hr *http.Request) {
	if s, ok := hr.Body.(*sentBody); ok {
		s.kept.b = nil
	}
}

var errBodyForgotten = errors.New("upstream request body already let go of")

// keptBody is what GetBody rewinds from.
type keptBody struct{ b []byte }

// sentBody reads a request body, letting go of it at its end.
type sentBody struct {
	b    []byte
	kept *keptBody
}

func (s *sentBody) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	n := copy(p, s.b)
	if s.b = s.b[n:]; len(s.b) == 0 {
		s.b = nil
	}
	return n, nil
}

func (s *sentBody) Close() error { return nil }
