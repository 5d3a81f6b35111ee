package engine

import (
	"net/http"
	"net/url"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// The engine's side of tracing: each hook is a nil check when the request
// has no recording span (the site has no `tracing`), so an untraced
// request does no tracing work.

// tracer is the exchange's traced request, looked up once (nil: untraced).
func (e *Engine) tracer(x *Exchange) *tracing.Request {
	if !x.traced {
		x.traced = true
		if x.R != nil {
			x.Trace = tracing.Begin(x.R.Context(), e.TraceContent)
		}
	}
	return x.Trace
}

// traceAttempt starts the span of an attempt on ch and sends its
// traceparent upstream with hr.
func (e *Engine) traceAttempt(x *Exchange, ch *routing.Channel, upstreamModel string, n int, hr *http.Request) {
	x.Trace.StartAttempt(tracing.Attempt{Operation: tracing.OperationOf(x.Req.Op, x.Req.Dialect), Model: upstreamModel,
		Channel: ch.Name, Provider: ch.Type, Number: n}, hr.Method, hr.URL, hr.Header)
}

// traceFailure ends the attempt's span with f.
func traceFailure(tr *tracing.Request, f *Failure) {
	tr.AttemptFailed(tracing.Failure{Status: f.Err.Status, UpstreamStatus: f.UpstreamStatus, Type: string(f.Err.Type),
		ChannelFault: f.Channel, Message: f.Err.Message})
}

// traceStream has a traced passthrough stream translated aside as well,
// for its finish reason and text (see adapters.StreamDecoder.Watch).
func traceStream(tr *tracing.Request, dec *adapters.StreamDecoder, prov adapters.ChatProvider, req *adapters.Request) {
	dec.Watch(prov.NewStreamStep(req), tr.Observe)
}

// traceAnswer records a traced whole answer: its model, finish reason and
// (with trace_content) message. An answer relayed in the client's own
// dialect was not decoded: it is decoded aside, as for another dialect.
func traceAnswer(tr *tracing.Request, req *adapters.Request, out *adapters.Response, body []byte, decode func(*adapters.Request, []byte) (*adapters.Response, error)) {
	if out.Raw != nil && req.Op == adapters.OpChat {
		aside := *req
		aside.Dialect = ""
		if full, err := decode(&aside, body); err == nil {
			out = full
		}
	}
	tr.ResponseModel(out.Model)
	tr.FinishReason(string(out.StopReason))
	tr.Output(&out.Message, "")
}

// traceSettled annotates the server span with the settled request.
func (e *Engine) traceSettled(tr *tracing.Request, x *Exchange, u adapters.Usage, cost int64) {
	var provider string
	if ch := e.Channels.Channel(x.Channel); x.Channel != "" && ch != nil {
		provider = ch.Type
	}
	var user, token int64
	if x.ID != nil {
		user, token = x.ID.User.ID, x.ID.Token.ID
	}
	s := tracing.Summary{Operation: tracing.OperationOf(x.Req.Op, x.Req.Dialect), Provider: provider, Channel: x.Channel,
		Model: x.Req.Model, Stream: x.Req.Stream, InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens, Cost: cost, UserID: user,
		TokenID: token, RequestID: x.RequestID, Status: x.Status, Error: x.ErrMsg}
	if x.Req.Op == adapters.OpRealtime && (u.Known() || x.Media != nil) {
		// a response (or transcription) of a session: an event on the
		// session's span
		tr.Response(s)
		return
	}
	tr.Finish(s)
}

// traceDial starts the span of a Realtime connect attempt and sends its
// traceparent with the handshake's header.
func (e *Engine) traceDial(x *Exchange, ch *routing.Channel, upstreamModel, rawURL string, hdr http.Header, n int) {
	u, err := url.Parse(rawURL)
	if err != nil {
		u = nil
	}
	x.Trace.StartAttempt(tracing.Attempt{Operation: "realtime", Model: upstreamModel, Channel: ch.Name, Provider: ch.Type, Number: n},
		http.MethodGet, u, hdr)
}
