package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// relayBody answers a non-streamed request.
func (h *Relay) relayBody(x *exchange, prov adapters.Provider, resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	x.ttfb = time.Since(x.start)
	if err != nil {
		return x.fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer broke off: %v", err))
	}
	out, err := prov.DecodeResponse(x.req, body)
	if err != nil {
		return x.fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer could not be read: %v", err))
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
	_, err = x.w.Write(encoded)
	return err
}

// relayStream relays a stream event by event, flushing each as it comes.
// Once the first byte is out, an upstream failure ends the stream with an
// error event in the caller's dialect: never a clean end, which SDKs would
// take for a finished answer.
func (h *Relay) relayStream(x *exchange, prov adapters.Provider, resp *http.Response) error {
	defer resp.Body.Close()
	enc := x.dialect.NewStreamEncoder(x.req)
	dec := prov.NewStreamDecoder(x.req, resp.Body)
	rc := http.NewResponseController(x.w)
	hdr := x.w.Header()
	hdr.Set("Content-Type", enc.ContentType())
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	pending, _ := dec.(adapters.Pending)
	unflushed := false
	buf := make([]byte, 0, 512)
	for {
		ev, err := dec.Next()
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
			e := asError(err)
			if e.Status == 0 || e.Status < 400 {
				e.Status = http.StatusBadGateway
			}
			if _, ok := err.(*adapters.Error); !ok {
				e = adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream stream broke off before its end: %v", err)
			}
			x.status, x.errMsg = e.Status, e.Message
			buf = enc.Error(buf[:0], e)
			if _, werr := x.w.Write(buf); werr == nil {
				_ = rc.Flush()
			}
			break
		}
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
		if !unflushed || (pending != nil && pending.Pending()) {
			continue // the next event is already here: one flush for both
		}
		if err := rc.Flush(); err != nil {
			x.status, x.errMsg = adapters.StatusClientClosed, "client disconnected"
			break
		}
		unflushed = false
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
