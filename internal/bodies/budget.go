// Package bodies reads request and answer bodies within bounds: a
// process-wide budget of bytes being decoded at once, a size limit per
// body, and multipart uploads spooled to unlinked temporary files. It
// imports no Caddy package.
package bodies

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// Budget bounds the bytes of request bodies read and decoded at
// once, process-wide, so a burst of large bodies gets 503s rather than the
// process an OOM kill.
type Budget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// NewBudget is a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Take reserves n bytes, or reports that they are not free.
func (b *Budget) Take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// Give returns n bytes taken.
func (b *Budget) Give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Why a body was not read.
var (
	ErrBusy     = errors.New("too many request bodies in flight")
	ErrTooLarge = errors.New("body too large")
)

// bodyChunk is how much of a body without Content-Length is reserved at a
// time while it is read.
const bodyChunk = 256 << 10

// ReadRequest reads a request body of at most max bytes, holding its
// size in the in-flight budget. The caller gives back held bytes once the
// body is decoded.
func (b *Budget) ReadRequest(r *http.Request, limit int64) (body []byte, held int64, err error) {
	if r.ContentLength > limit {
		return nil, 0, ErrTooLarge
	}
	if r.ContentLength >= 0 {
		if !b.Take(r.ContentLength) {
			return nil, 0, ErrBusy
		}
		held = r.ContentLength
		// one byte of room past the declared length tells a body that
		// runs on, without a buffer of its own for the probe
		body = make([]byte, r.ContentLength, r.ContentLength+1)
		n, err := io.ReadFull(r.Body, body)
		if err != nil {
			return nil, held, err
		}
		if n, _ := r.Body.Read(body[n : n+1]); n > 0 {
			return nil, held, errors.New("the body is longer than its Content-Length")
		}
		return body[:n], held, nil
	}
	for {
		if len(body) == cap(body) {
			if int64(len(body)) >= limit+1 {
				return nil, held, ErrTooLarge
			}
			grow := int64(min(max(cap(body), bodyChunk), 8<<20))
			if !b.Take(grow) {
				return nil, held, ErrBusy
			}
			held += grow
			body = append(body[:cap(body)], make([]byte, grow)...)[:len(body)]
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if int64(len(body)) > limit {
			return nil, held, ErrTooLarge
		}
		if err == io.EOF {
			return body, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// ReadBounded reads a whole body of at most max bytes, sized by its
// Content-Length when it gives a plausible one.
func ReadBounded(resp *http.Response, max int64) ([]byte, error) {
	return readBounded(resp, max, nil)
}

// ReadBoundedPooled is ReadBounded into a buffer that Recycle takes back
// once nothing refers to the body any more: a relayed answer is read whole
// for its usage, written out and dropped, a few KB on every request.
func ReadBoundedPooled(resp *http.Response, max int64) ([]byte, error) {
	var buf []byte
	if p, ok := answerBuffers.Get().(*[]byte); ok {
		buf = (*p)[:0]
	}
	return readBounded(resp, max, buf)
}

// Recycle gives a body read by ReadBoundedPooled back for another answer.
// Nothing may refer to it afterwards (io.Writer implementations do not
// keep what they were given).
func Recycle(body []byte) {
	if cap(body) == 0 || cap(body) > maxPooledAnswer {
		return // an answer this large is rare: it is left to the collector
	}
	body = body[:0]
	answerBuffers.Put(&body)
}

var answerBuffers sync.Pool

const maxPooledAnswer = 64 << 10

func readBounded(resp *http.Response, max int64, buf []byte) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, ErrTooLarge
	}
	switch {
	case resp.ContentLength > 0 && !resp.Uncompressed:
		if int64(cap(buf)) < resp.ContentLength+1 {
			buf = make([]byte, 0, resp.ContentLength+1)
		}
	case cap(buf) == 0:
		buf = make([]byte, 0, 4<<10)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
