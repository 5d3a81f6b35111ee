package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/routing"
)

// relayBody answers a non-streamed request. The body is read whole, up to
// the channel's max_response_body (counted after decompression) and within
// its timeout.
func (h *Relay) relayBody(x *exchange, at *engine.Attempt, ch *routing.Channel, b channelBounds, prov adapters.Provider, resp *http.Response) error {
	defer at.End()
	defer resp.Body.Close()
	body, err := bodies.ReadBounded(resp, b.maxResponseBody)
	x.ttfb = time.Since(x.start)
	switch {
	case x.r.Context().Err() != nil:
		return x.fail(adapters.ClientClosed())
	case errors.Is(at.Cause(), engine.ErrTimeout):
		h.log.Warn("upstream answer timed out", zap.String("channel", ch.Name), zap.Duration("timeout", b.timeout))
		return x.fail(adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q did not finish its answer within %s (its timeout)", ch.Name, b.timeout))
	case errors.Is(err, bodies.ErrTooLarge):
		h.log.Warn("upstream answer too large", zap.String("channel", ch.Name), zap.Int64("max_response_body", b.maxResponseBody))
		return x.fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q answered with more than the gateway's limit of %d bytes (max_response_body)", ch.Name, b.maxResponseBody))
	case err != nil:
		h.log.Warn("upstream answer broke off", zap.String("channel", ch.Name), zap.Error(err))
		return x.fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q broke off", ch.Name))
	}
	out, err := prov.DecodeResponse(x.req, body)
	if err != nil {
		h.log.Warn("upstream answer unreadable", zap.String("channel", ch.Name), zap.Error(err))
		return x.fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q could not be read", ch.Name))
	}
	x.usage = out.Usage
	if !x.usage.Known() {
		for _, p := range out.Message.Parts {
			x.text.WriteString(p.Text)
		}
	}
	encoded, err := x.dialect.EncodeResponse(x.req, out)
	if err != nil {
		return x.fail(asError(err))
	}
	ct := out.ContentType
	if ct == "" {
		ct = "application/json"
	}
	x.w.Header().Set("Content-Type", ct)
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(encoded) // a write error is the client gone
	return nil
}

// relayStream relays a stream event by event, flushing each as it comes;
// first is the event openStream already read. Once the first byte is out,
// an upstream failure (a break, an event past max_stream_event, a silence
// past stream_idle_timeout) ends the stream with an error event in the
// caller's dialect: never a clean end, which SDKs would take for a
// finished answer.
func (h *Relay) relayStream(x *exchange, at *engine.Attempt, ch *routing.Channel, b channelBounds, dec adapters.StreamDecoder, first *adapters.StreamEvent) error {
	defer at.End()
	enc := x.dialect.NewStreamEncoder(x.req)
	rc := http.NewResponseController(x.w)
	hdr := x.w.Header()
	hdr.Set("Content-Type", enc.ContentType())
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)

	pending, _ := dec.(adapters.Pending)
	unflushed := true // the headers
	buf := make([]byte, 0, 512)
	ev, err := first, error(nil)
	for {
		if err != nil {
			if errors.Is(err, io.EOF) {
				buf = enc.Finish(buf[:0])
				if _, werr := x.w.Write(buf); werr == nil {
					_ = rc.Flush()
				}
				break
			}
			if x.r.Context().Err() != nil {
				x.status, x.errMsg = adapters.StatusClientClosed, "client disconnected"
				break
			}
			f := h.engine.StreamFailure(ch, at, b.streamIdle, b.maxStreamEvent, err)
			if f.Channel {
				h.engine.FailedMidAnswer(ch, f)
			}
			e := f.Err
			x.status, x.errMsg = e.Status, e.Message
			buf = enc.Error(buf[:0], e)
			if _, werr := x.w.Write(buf); werr == nil {
				_ = rc.Flush()
			}
			break
		}
		at.Alive()
		if x.ttfb == 0 {
			x.ttfb = time.Since(x.start)
		}
		x.observe(ev)
		buf = enc.Encode(buf[:0], ev)
		if len(buf) > 0 {
			if _, err := x.w.Write(buf); err != nil {
				x.status, x.errMsg = adapters.StatusClientClosed, "client disconnected"
				break
			}
			unflushed = true
		}
		if unflushed && (pending == nil || !pending.Pending()) {
			// nothing more is here yet: flush (else one flush for both)
			if err := rc.Flush(); err != nil {
				x.status, x.errMsg = adapters.StatusClientClosed, "client disconnected"
				break
			}
			unflushed = false
		}
		ev, err = dec.Next()
	}
	// a stream cut before its end is billed on what was generated: the
	// text after the last usage the upstream reported counts too
	x.cut = x.status != http.StatusOK
	if us, ok := dec.(adapters.UsageSoFar); ok && x.cut && !x.usage.Known() {
		if u := us.UsageSoFar(); u != nil {
			x.usage = *u
		}
	}
	if !x.usage.Known() || x.cut {
		if pt, ok := dec.(adapters.PartialText); ok {
			x.tail = pt.PartialText()
		}
	}
	if r, ok := dec.(adapters.Releaser); ok {
		r.Release()
	}
	return nil
}

// observe keeps what billing needs from an event: the last usage the
// upstream reported, and the text in case it reports none.
func (x *exchange) observe(ev *adapters.StreamEvent) {
	switch ev.Type {
	case adapters.EventUsage:
		if ev.Usage != nil {
			x.usage = *ev.Usage
		}
	case adapters.EventTextDelta, adapters.EventThinkingDelta:
		x.text.WriteString(ev.Text)
	case adapters.EventToolCallStart, adapters.EventToolCallDelta:
		if ev.ToolCall != nil {
			x.text.WriteString(ev.ToolCall.Name)
			x.text.WriteString(ev.ToolCall.Arguments)
		}
	}
}
