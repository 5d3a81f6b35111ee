package engine

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/routing"
)

// relayBody answers a non-streamed request. The body is read whole, up to
// the channel's max_response_body (counted after decompression) and within
// its timeout.
func (e *Engine) relayBody(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, decode func(*adapters.Request, []byte) (*adapters.Response, error), resp *http.Response) error {
	defer at.End()
	defer resp.Body.Close()
	body, err := bodies.ReadBoundedPooled(resp, b.MaxResponseBody)
	x.TTFB = time.Since(x.Start)
	switch {
	case x.R.Context().Err() != nil:
		return x.Fail(adapters.ClientClosed())
	case errors.Is(at.Cause(), ErrTimeout):
		e.Log.Warn("upstream answer timed out", zap.String("channel", ch.Name), zap.Duration("timeout", b.Timeout))
		return x.Fail(adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q did not finish its answer within %s (its timeout)", ch.Name, b.Timeout))
	case errors.Is(err, bodies.ErrTooLarge):
		e.Log.Warn("upstream answer too large", zap.String("channel", ch.Name), zap.Int64("max_response_body", b.MaxResponseBody))
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q answered with more than the gateway's limit of %d bytes (max_response_body)", ch.Name, b.MaxResponseBody))
	case err != nil:
		e.Log.Warn("upstream answer broke off", zap.String("channel", ch.Name), zap.Error(err))
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q broke off", ch.Name))
	}
	out, err := decode(x.Req, body)
	if err != nil {
		e.Log.Warn("upstream answer unreadable", zap.String("channel", ch.Name), zap.Error(err))
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q could not be read", ch.Name))
	}
	x.Usage = out.Usage
	if x.Trace != nil {
		traceAnswer(x.Trace, x.Req, out, body, decode)
	}
	if !x.Usage.Known() {
		for _, p := range out.Message.Parts {
			x.Text.WriteString(p.Text)
		}
	}
	encoded, err := x.Dialect.EncodeResponse(x.Req, out)
	if err != nil {
		return x.Fail(AsError(err))
	}
	ct := out.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h := x.W.Header()
	h.Set("Content-Type", ct)
	// Its length, so that net/http never chunks an answer past its 2 KB
	// buffer, and the flush below sends it whole.
	h.Set("Content-Length", strconv.Itoa(len(encoded)))
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	if rec := x.recording(); rec != nil {
		rec.Body(ct, encoded)
		e.keepAnswer(x)
	}
	// The row goes to the inflight log before the body goes out: with
	// its length declared, the client has the whole answer as soon as
	// its last byte is written (by the flush below, or by net/http's
	// buffer filling), and a process killed after that must not lose
	// the row of an answer the client has read to its end.
	if x.Settled {
		e.Settle(x)
	}
	_, _ = x.W.Write(encoded) // a write error is the client gone
	// Sent now rather than when the handler chain returns: Caddy writes
	// the access log line before net/http's last flush, and the client
	// need not wait for it (the same write, a log write earlier). HTTP/1
	// only: on HTTP/2 and 3 a flush before the end would cost the stream
	// an empty frame of its own to end it.
	if x.R.ProtoMajor == 1 {
		_ = http.NewResponseController(x.W).Flush()
	}
	if x.Trace == nil {
		// out and encoded, which may be body or parts of it, are done
		// with; a traced answer's span may still hold them
		bodies.Recycle(body)
	}
	return nil
}

// writeAt is how many encoded bytes a stream holds back while the
// upstream's next events are already read: past it they are written (and
// flushed once the decoder has no more), as net/http's own buffer of a
// response would send them.
const writeAt = 2 << 10

// streamBuffers hold the encoded events of streams being relayed.
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2*writeAt); return &b }}

// eventBuf is a stream's hold on a buffer of streamBuffers: taken when an
// event is to be encoded, given back once everything encoded is written
// and the stream waits for the upstream again, so a stream held open
// between events (thousands of them, for minutes) keeps no buffer.
type eventBuf struct{ pooled *[]byte }

// take returns buf, or an empty pooled buffer when none is held.
func (b *eventBuf) take(buf []byte) []byte {
	if b.pooled != nil {
		return buf
	}
	b.pooled = streamBuffers.Get().(*[]byte)
	return (*b.pooled)[:0]
}

// give hands buf (the held buffer, perhaps grown) back, unless an outsized
// event grew it, and returns nil.
func (b *eventBuf) give(buf []byte) []byte {
	if b.pooled != nil && cap(buf) <= 64<<10 {
		*b.pooled = buf[:0]
		streamBuffers.Put(b.pooled)
	}
	b.pooled = nil
	return nil
}

// relayStream relays a stream event by event, flushing each as it comes;
// first is the event openStream already read. Once the first byte is out,
// an upstream failure (a break, an event past max_stream_event, a silence
// past stream_idle_timeout) ends the stream with an error event in the
// caller's dialect: never a clean end, which SDKs would take for a
// finished answer.
func (e *Engine) relayStream(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, body io.Reader, dec *adapters.StreamDecoder, first *adapters.StreamEvent) error {
	defer at.End()
	enc := x.Dialect.NewStreamEncoder(x.Req)
	rc := http.NewResponseController(x.W)
	hdr := x.W.Header()
	hdr.Set("Content-Type", enc.ContentType())
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	// the client's body as sent was for building the upstream's request
	// (and the cache key, the reservation, before): no channel is tried
	// after this one, and a stream held open for minutes need not keep its
	// prompt as sent (the decoded text stays, for counting without usage)
	x.Req.Raw = nil
	rec := x.recording()
	if rec != nil {
		rec.ContentType(enc.ContentType())
	}

	// Events are encoded into buf and written when the decoder holds no
	// more of them (or buf grew past writeAt), one Write and one Flush for
	// all that arrived together: Caddy's writer resets the connection's
	// write deadline at every Write.
	unflushed := true // the headers
	var held eventBuf
	var buf []byte
	defer func() { held.give(buf) }()
	ev, err := first, error(nil)
	drained := false // the client left and the upstream was read to its end
	billed := false  // streamEnded has run
	for {
		if err != nil {
			if errors.Is(err, io.EOF) {
				buf = held.take(buf)
				n := len(buf)
				buf = enc.Finish(buf)
				billed = x.streamEnded(dec, false)
				if rec != nil {
					rec.Event(buf[n:], time.Now())
					e.keepAnswer(x)
				}
				e.endStream(x, rc, buf)
				at.EndBody(body)
				break
			}
			if x.R.Context().Err() != nil {
				// the upstream's stream ended while the client was leaving
				// (within the drain's bounds, or broken): nothing more to read
				x.Status, x.ErrMsg = adapters.StatusClientClosed, "client disconnected"
				break
			}
			f := e.StreamFailure(ch, at, b.StreamIdle, b.MaxStreamEvent, err)
			if f.Channel {
				e.FailedMidAnswer(ch, f)
			}
			x.Status, x.ErrMsg = f.Err.Status, f.Err.Message
			buf = enc.Error(held.take(buf), f.Err) // after the events already encoded
			billed = x.streamEnded(dec, false)
			e.endStream(x, rc, buf)
			break
		}
		at.Alive()
		if x.TTFB == 0 {
			x.TTFB = time.Since(x.Start)
			if x.Trace != nil {
				x.Trace.FirstToken()
			}
		}
		x.Observe(ev)
		buf = held.take(buf)
		n := len(buf)
		buf = enc.Encode(buf, ev)
		if rec != nil {
			rec.Event(buf[n:], time.Now())
		}
		pending := dec.Pending()
		if len(buf) > 0 && (!pending || len(buf) >= writeAt) {
			if _, err := x.W.Write(buf); err != nil {
				drained = e.drain(x, at, ch, dec)
				break
			}
			buf = buf[:0]
			unflushed = true
		}
		if unflushed && !pending {
			// nothing more is here yet: flush (else one flush for all)
			if err := rc.Flush(); err != nil {
				drained = e.drain(x, at, ch, dec)
				break
			}
			unflushed = false
		}
		if !pending {
			// all written: the buffer waits in the pool, not in this
			// stream, until the upstream's next event
			buf = held.give(buf)
		}
		ev, err = dec.Next()
	}
	if drained {
		at.EndBody(body) // as at the end above: the connection is reused
	}
	if !billed {
		x.streamEnded(dec, drained)
	}
	dec.Release()
	return nil
}

// streamEnded fixes what a stream's row bills once it is over: one cut
// before its end (not drained to it) is billed on what was generated,
// the text after the last usage the upstream reported counting too. It
// returns true.
func (x *Exchange) streamEnded(dec *adapters.StreamDecoder, drained bool) bool {
	x.Cut = x.Status != http.StatusOK && !drained
	if x.Cut && !x.Usage.Known() {
		if u := dec.UsageSoFar(); u != nil {
			x.Usage = *u
		}
	}
	if !x.Usage.Known() || x.Cut {
		x.Tail = dec.PartialText()
	}
	return true
}

// endStream settles x, then writes a stream's last bytes (its closing
// event, or the error event that ends it): the row goes to the inflight
// log and the hold is settled first, as a body's are before its bytes,
// since the SDKs stop reading there and a client may send its next
// request, read its budget, or see the process killed before the handler
// returns.
func (e *Engine) endStream(x *Exchange, rc *http.ResponseController, last []byte) {
	if x.Settled {
		e.Settle(x)
	}
	if _, err := x.W.Write(last); err == nil {
		_ = rc.Flush()
	}
}

// DrainBounds bound how long and how far a stream's upstream is read after
// its client has gone: the usage of OpenAI-style streams, and Anthropic's
// and Gemini's final counts, come only at their end, and the upstream
// bills its whole answer whether or not the client stayed. Zero Timeout:
// no drain, the upstream is hung up on with the client.
type DrainBounds struct {
	Timeout  time.Duration
	MaxBytes int64
}

// Defaults of DrainBounds.
const (
	DefaultDrainTimeout  = 30 * time.Second
	DefaultDrainMaxBytes = 4 << 20
)

// ConfiguredDrain is the drain as configured: timeout 0 is the default,
// a negative one no drain; maxBytes 0 or less is the default.
func ConfiguredDrain(timeout time.Duration, maxBytes int64) DrainBounds {
	d := DrainBounds{Timeout: timeout, MaxBytes: maxBytes}
	if d.Timeout == 0 {
		d.Timeout = DefaultDrainTimeout
	}
	d.Timeout = max(d.Timeout, 0)
	if d.MaxBytes <= 0 {
		d.MaxBytes = DefaultDrainMaxBytes
	}
	return d
}

// drain reads the rest of a stream whose client has gone, writing nothing,
// so that the usage it reports at its end is billed; it reports whether
// the upstream's end came. It stops at the drain's bounds (the attempt's
// context ends Timeout after the client left; MaxBytes of the body read
// since), at a silence past the stream's idle timeout, or at an upstream
// error: the stream is then billed as a cut one, on what was known.
func (e *Engine) drain(x *Exchange, at *Attempt, ch *routing.Channel, dec *adapters.StreamDecoder) bool {
	x.Status, x.ErrMsg = adapters.StatusClientClosed, "client disconnected"
	at.ClientGone()
	if e.Drain.Timeout <= 0 {
		return false
	}
	start := dec.BytesRead()
	for {
		ev, err := dec.Next()
		if err != nil {
			ended := errors.Is(err, io.EOF)
			if !ended {
				if ce := e.Log.Check(zap.DebugLevel, "stopped reading a stream its client left"); ce != nil {
					ce.Write(zap.String("channel", ch.Name), zap.Error(err), zap.NamedError("cause", at.Cause()),
						zap.Int64("bytes", dec.BytesRead()-start))
				}
			}
			return ended
		}
		at.Alive()
		x.Observe(ev)
		if dec.BytesRead()-start > e.Drain.MaxBytes {
			if ce := e.Log.Check(zap.DebugLevel, "stopped reading a stream its client left"); ce != nil {
				ce.Write(zap.String("channel", ch.Name), zap.Int64("max_bytes", e.Drain.MaxBytes))
			}
			return false
		}
	}
}
