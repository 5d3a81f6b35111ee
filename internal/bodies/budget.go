// Package bodies reads request and answer bodies within bounds: a
// process-wide budget of bytes being decoded at once, shared out so no one
// key or client address takes it all, a size limit per body, and multipart
// uploads spooled to unlinked temporary files. It imports no Caddy
// package.
package bodies

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// Budget bounds the bytes of request bodies held at once: in all, for
// each key and for each client address, so that a burst of large bodies
// gets refusals rather than the process an OOM kill, and one key or one
// address cannot take the room every other caller needs. Bytes are
// charged as they arrive, never as a Content-Length declares: a body that
// stalls holds what it sent (ReadRequest says how much more), not what it
// promised.
type Budget struct {
	limits Limits
	mu     sync.Mutex
	used   int64
	keys   map[int64]int64  // by Owner.Key, while it holds any
	addrs  map[string]int64 // by Owner.Address, while it holds any
}

// Limits are a Budget's bounds in bytes. A zero PerKey or PerAddress is
// no bound of that kind.
type Limits struct {
	Total      int64
	PerKey     int64
	PerAddress int64
}

// Owner is whom a body's bytes are counted against.
type Owner struct {
	Key     int64  // the gateway key's id; 0 for none
	Address string // the client's network (an IPv4 address, an IPv6 /64); "" for none
}

// Held is what one body holds of a Budget; Give returns it.
type Held struct {
	owner Owner
	n     int64
}

// Limits are b's bounds.
func (b *Budget) Limits() Limits { return b.limits }

// Bytes is how many bytes h holds.
func (h Held) Bytes() int64 { return h.n }

// NewBudget is a budget within l.
func NewBudget(l Limits) *Budget {
	return &Budget{limits: l, keys: map[int64]int64{}, addrs: map[string]int64{}}
}

// Why a body was not read.
var (
	ErrBusy     = errors.New("too many request bodies in flight")
	ErrTooLarge = errors.New("body too large")
	// ErrKeyBusy and ErrAddressBusy: the key's or the client address's
	// share of the budget is taken by its other bodies
	ErrKeyBusy     = errors.New("too many request bodies in flight for this key")
	ErrAddressBusy = errors.New("too many request bodies in flight from this address")
)

// Busy reports whether err is a refusal for lack of room: the whole
// budget's (ErrBusy) or the caller's share (ErrKeyBusy, ErrAddressBusy).
func Busy(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrKeyBusy) || errors.Is(err, ErrAddressBusy)
}

// Take adds n bytes to what h holds for h's owner, or says which bound has
// no room for them (and holds nothing more). The caller's own shares are
// checked first: a caller over its share is told so even when the whole
// budget is taken too, since waiting for others would not help it.
func (b *Budget) Take(h *Held, n int64) error {
	k, a := h.owner.Key != 0 && b.limits.PerKey > 0, h.owner.Address != "" && b.limits.PerAddress > 0
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case k && b.keys[h.owner.Key]+n > b.limits.PerKey:
		return ErrKeyBusy
	case a && b.addrs[h.owner.Address]+n > b.limits.PerAddress:
		return ErrAddressBusy
	case b.used+n > b.limits.Total:
		return ErrBusy
	}
	b.used += n
	if k {
		b.keys[h.owner.Key] += n
	}
	if a {
		b.addrs[h.owner.Address] += n
	}
	h.n += n
	return nil
}

// Give returns what h holds.
func (b *Budget) Give(h Held) {
	if h.n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= h.n
	if h.owner.Key != 0 && b.limits.PerKey > 0 {
		if left := b.keys[h.owner.Key] - h.n; left > 0 {
			b.keys[h.owner.Key] = left
		} else {
			delete(b.keys, h.owner.Key)
		}
	}
	if h.owner.Address != "" && b.limits.PerAddress > 0 {
		if left := b.addrs[h.owner.Address] - h.n; left > 0 {
			b.addrs[h.owner.Address] = left
		} else {
			delete(b.addrs, h.owner.Address)
		}
	}
}

// firstChunk is the buffer a body is read into first: most bodies fit it
// (or their Content-Length, when smaller), and a body that sends nothing
// holds no more than it.
const firstChunk = 64 << 10

// ReadRequest reads a request body of at most limit bytes for who,
// holding the bytes of its buffer in the budget as they arrive: the
// buffer starts at the smaller of 64 KiB and its Content-Length and
// doubles (up to the Content-Length, or the limit) each time it fills, so
// a body holds at most twice what it sent, or 64 KiB. A Content-Length
// over the limit is refused before anything is read or held. The caller
// gives back held bytes once the body is decoded, also after an error.
func (b *Budget) ReadRequest(r *http.Request, limit int64, who Owner) (body []byte, held Held, err error) {
	held.owner = who
	if r.ContentLength > limit {
		return nil, held, ErrTooLarge
	}
	// the most the buffer grows to: one byte of room past the declared
	// length or the limit tells a body that runs on, without a buffer of
	// its own for the probe
	end := limit + 1
	if r.ContentLength >= 0 {
		end = r.ContentLength + 1
	}
	size := min(end, firstChunk)
	if err := b.Take(&held, size); err != nil {
		return nil, held, err
	}
	body = make([]byte, 0, size)
	for {
		if len(body) == cap(body) {
			if int64(len(body)) == end {
				if r.ContentLength >= 0 {
					return nil, held, errors.New("the body is longer than its Content-Length")
				}
				return nil, held, ErrTooLarge
			}
			next := min(2*int64(cap(body)), end)
			if err := b.Take(&held, next-int64(cap(body))); err != nil {
				return nil, held, err
			}
			grown := make([]byte, len(body), next)
			copy(grown, body)
			body = grown
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, held, err
		}
	}
	if r.ContentLength >= 0 && int64(len(body)) < r.ContentLength {
		return nil, held, io.ErrUnexpectedEOF
	}
	if int64(len(body)) > limit {
		return nil, held, ErrTooLarge
	}
	return body, held, nil
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
