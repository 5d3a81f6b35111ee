package engine

import (
	"context"
	"io"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// Serve tries the plan's channels until one answers, and relays its
// answer to the client: a stream event by event, a body whole, media as
// its endpoint answers it. A failure is answered in the client's dialect.
func (e *Engine) Serve(x *Exchange, plan []*routing.Channel) error {
	try := &relayAttempt{e: e, x: x}
	if tr := e.tracer(x); tr != nil && tr.Recording() {
		tr.Input(x.Req)
	}
	ch, f := e.Run(x.R.Context(), x.Req.Model, plan, try)
	if f != nil {
		return x.Fail(f.Err)
	}
	x.Channel = ch.Name
	e.answered(x, ch)
	up := try.up
	switch {
	case x.Media != nil && x.Req.Op == adapters.OpSpeech:
		return e.relaySpeech(x, try.at, ch, up.Bounds, try.resp)
	case x.Media != nil:
		return e.relayMedia(x, try.at, ch, up.Bounds, up.Provider.(adapters.MediaProvider), try.resp)
	case x.Req.Stream:
		return e.relayStream(x, try.at, ch, up.Bounds, try.resp.Body, try.dec, try.first)
	case x.Req.Op == adapters.OpRerank:
		return e.relayBody(x, try.at, ch, up.Bounds, up.Provider.(adapters.RerankProvider).DecodeRerankResponse, try.resp)
	}
	return e.relayBody(x, try.at, ch, up.Bounds, up.Provider.(adapters.ChatProvider).DecodeResponse, try.resp)
}

// buildFunc builds one attempt's upstream request.
type buildFunc func(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error)

// builder is the request builder of the capability the request needs of
// prov, nil when prov's family has none (the plan keeps those that do).
func builder(prov adapters.Provider, x *Exchange) buildFunc {
	switch {
	case x.Media != nil:
		if mp, ok := prov.(adapters.MediaProvider); ok {
			return mp.NewRequest
		}
	case x.Req.Op == adapters.OpRerank:
		if rp, ok := prov.(adapters.RerankProvider); ok {
			return rp.NewRequest
		}
	default:
		if cp, ok := prov.(adapters.ChatProvider); ok {
			return cp.NewRequest
		}
	}
	return nil
}

// relayAttempt is one chat, completion, embedding, responses or rerank
// attempt: the request sent, and for a stream its first event read, so
// an upstream that fails at once fails over.
type relayAttempt struct {
	e     *Engine
	x     *Exchange
	at    *Attempt
	resp  *http.Response
	dec   *adapters.StreamDecoder
	first *adapters.StreamEvent
	// the price-changing fields the request sets, for the channel type
	// pricedType: read once per vendor, not once per channel tried
	pricedType    string
	fields, betas []string
	up            *Upstream // the record the answering attempt used
	n             int       // attempts made, for their spans
}

func (ra *relayAttempt) Try(ch *routing.Channel) *Failure {
	e, x := ra.e, ra.x
	up := e.Upstreams.Get(ch.Name)
	if up == nil {
		return removedChannel(ch)
	}
	ra.up = up
	prov := up.Provider
	if ra.pricedType != ch.Type {
		ra.pricedType = ch.Type
		ra.fields, ra.betas = PricedFields(prov, x.Req)
		ra.fields = PricedBy(x.Price, ra.fields)
	}
	if refused := up.Allowance.Check(ch.Name, x.Req.Model, ra.fields, ra.betas); refused != nil {
		return &Failure{Err: refused}
	}
	build := builder(prov, x)
	if build == nil {
		return &Failure{Err: Unserved(ch, prov, x.Req.Op)}
	}
	b := up.Bounds
	// media answers are timed whole, and only chat streams
	stream := x.Req.Stream && x.Media == nil && x.Req.Op != adapters.OpRerank
	if stream {
		// the upstream may start on the request as soon as it has it, and
		// bills its answer: a client that leaves (while a model thinks
		// before its first event, or mid-stream) does not end it at once,
		// it is read on for its usage within the drain's bounds
		ra.at = NewStreamAttempt(x.R.Context(), b.StreamIdle, e.Drain.Timeout)
	} else {
		ra.at = NewAttempt(x.R.Context(), b.Timeout, b.StreamIdle, false)
	}
	ra.n++
	resp, f := e.send(x, ra.at, ch, up, build, ra.n)
	if f == nil && stream {
		ra.dec, ra.first, f = e.openStream(x, ra.at, ch, b, prov.(adapters.ChatProvider), resp)
	}
	if f != nil {
		ra.at.End()
		if x.Trace != nil {
			traceFailure(x.Trace, f)
		}
		e.attemptFailed(x, ch, f)
		return f
	}
	ra.resp = resp
	return nil
}

// send makes one attempt on one channel. It returns the upstream response
// when its status is 2xx, and otherwise why not.
func (e *Engine) send(x *Exchange, at *Attempt, ch *routing.Channel, rec *Upstream, build buildFunc, n int) (*http.Response, *Failure) {
	prov := rec.Provider
	up := &adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: x.upstreamKey(ch), Model: ch.UpstreamModel(x.Req.Model)}
	hr, err := build(at.Ctx, up, x.Req)
	if err != nil {
		return nil, &Failure{Err: AsError(err)}
	}
	if x.Trace != nil {
		e.traceAttempt(x, ch, up.Model, n, hr)
	}
	resp, err := rec.Client.Do(hr)
	// nothing sends it again: a stream's prompt is not kept for its life
	adapters.ForgetBody(hr)
	if err == nil {
		x.UpstreamID = UpstreamRequestID(prov, resp.Header)
		if x.Trace != nil {
			x.Trace.AttemptAnswered(resp.StatusCode)
		}
	}
	if err != nil {
		if x.R.Context().Err() != nil {
			// the upstream may have started on it: its prompt is billed
			x.Channel = ch.Name
			return nil, ClientClosed()
		}
		return nil, e.TransportFailure(ch, at, err)
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, e.UpstreamFailure(ch, prov.DecodeError(resp.StatusCode, b), resp.Header)
	}
	return resp, nil
}

// openStream reads a stream's first event before the client's headers go
// out, so an upstream that fails at once (an overloaded error as its first
// event, a stream that stays silent or ends) fails over like a status error.
// The host runs the family's stream step in the one decoder.
func (e *Engine) openStream(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, prov adapters.ChatProvider, resp *http.Response) (*adapters.StreamDecoder, *adapters.StreamEvent, *Failure) {
	dec := adapters.DecodeStream(prov, x.Req, resp.Body)
	dec.SetMaxEvent(b.MaxStreamEvent)
	if x.Trace != nil {
		traceStream(x.Trace, dec, prov, x.Req)
	}
	at.Alive()
	first, err := dec.Next()
	if err == nil {
		return dec, first, nil
	}
	resp.Body.Close()
	dec.Release()
	if x.R.Context().Err() != nil {
		// the upstream took the request (its headers came): its prompt is
		// billed, as when the client leaves while they are awaited
		x.Channel = ch.Name
		return nil, nil, ClientClosed()
	}
	return nil, nil, e.StreamFailure(ch, at, b.StreamIdle, b.MaxStreamEvent, err)
}
