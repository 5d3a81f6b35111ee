// Package tracing puts the gateway's requests into the OpenTelemetry traces
// that Caddy's own `tracing` handler starts: the GenAI semantic conventions'
// attributes on the request's server span, a client span per upstream
// attempt, the W3C traceparent sent upstream, and spans for task polls and
// Realtime sessions.
//
// It starts no exporter and no provider of its own: spans go wherever the
// site's `tracing` sends them (the OTEL_* environment). A request whose
// context holds no recording span gets a nil *Request from Begin, and every
// hook is skipped: without `tracing` the gateway does no tracing work.
//
// It must not import any Caddy package (the engines it serves do not).
package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scope names the gateway's spans' instrumentation scope.
const scope = "github.com/caddy-model-gateway/gateway"

// traceContext is the W3C TraceContext propagator: traceparent, tracestate.
var traceContext propagation.TraceContext

// seen is the tracer provider of the last recording span a request
// carried: background work (task polls) has no request, so it takes the
// provider Caddy's `tracing` handler uses from there. Nil until a traced
// request came in, and then polls are traced.
var seen atomic.Pointer[providerBox]

type providerBox struct{ tp trace.TracerProvider }

// Request is one traced request: its server span, and the upstream
// attempt in flight. Its methods are safe on a nil *Request (tracing off)
// but callers check for nil first, so that nothing is even computed.
type Request struct {
	span    trace.Span
	tracer  trace.Tracer
	content int // bytes of message content recorded, 0: none
	attempt trace.Span
	// respModel is the model the answering upstream was asked for, or the
	// one its answer named
	respModel string
	finish    string
	firstSeen bool
	// text is a stream's answer text, kept only while content is
	// recorded, and at most one byte past its size
	text   []byte
	output bool // Output recorded the answer
}

// Begin returns the traced request of ctx, nil when ctx holds no
// recording span (the site has no `tracing`, or the trace is not
// sampled). content is trace_content's size: the bytes of input and
// output messages recorded on the span, 0 for none.
func Begin(ctx context.Context, content int) *Request {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	tp := span.TracerProvider()
	if b := seen.Load(); b == nil || b.tp != tp {
		seen.Store(&providerBox{tp: tp})
	}
	return &Request{span: span, tracer: tp.Tracer(scope), content: content}
}

// TraceID is the request's trace id in hex, for its usage row.
func (r *Request) TraceID() string {
	if r == nil {
		return ""
	}
	return r.span.SpanContext().TraceID().String()
}

// SpanContext is the server span's, for what links to it (a task's polls).
func (r *Request) SpanContext() trace.SpanContext {
	if r == nil {
		return trace.SpanContext{}
	}
	return r.span.SpanContext()
}

// Attempt describes one upstream attempt as its span names it.
type Attempt struct {
	Operation string // the GenAI operation name, see OperationName
	Model     string // the model name sent upstream
	Channel   string
	Provider  string // the channel's type, see ProviderName
	Number    int    // 1 for the first channel tried
}

// StartAttempt starts the client span of one upstream attempt (ending the
// previous one if it is still open) and writes its traceparent into
// header, so the upstream continues the trace. u is the upstream request's
// URL: only its scheme, host and path are recorded, never its query (a
// key may travel there) or user info.
func (r *Request) StartAttempt(a Attempt, method string, u *url.URL, header http.Header) {
	if r == nil {
		return
	}
	r.EndAttempt()
	_, span := r.tracer.Start(trace.ContextWithSpan(context.Background(), r.span), SpanName(a.Operation, a.Model),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			OperationName.String(a.Operation),
			ProviderName.String(ProviderOf(a.Provider)),
			RequestModel.String(a.Model),
			Channel.String(a.Channel),
			AttemptNumber.Int(a.Number)))
	r.attempt = span
	r.respModel = a.Model
	if u != nil {
		r.Upstream(method, u, header)
	}
}

// Upstream records the attempt's upstream request (for an adapter that
// builds it after the attempt began) and sends its traceparent with it.
func (r *Request) Upstream(method string, u *url.URL, header http.Header) {
	if r == nil || r.attempt == nil {
		return
	}
	upstream(r.attempt, method, u, header)
}

// upstream records an upstream request on its client span and writes the
// span's traceparent into the request's header.
func upstream(span trace.Span, method string, u *url.URL, header http.Header) {
	attrs := []attribute.KeyValue{attribute.String("http.request.method", method),
		attribute.String("url.full", CleanURL(u)), attribute.String("server.address", u.Hostname())}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	span.SetAttributes(attrs...)
	traceContext.Inject(trace.ContextWithSpan(context.Background(), span), propagation.HeaderCarrier(header))
}

// Failure is why an attempt failed, in the gateway's own words (never the
// upstream's, which may echo a key).
type Failure struct {
	Status         int    // the status the client would be told
	UpstreamStatus int    // the upstream's, 0 when it did not answer
	Type           string // the error type (error.type)
	// ChannelFault: the channel's fault, so the next channel is tried;
	// otherwise the request's own, and the run ends
	ChannelFault bool
	Message      string
}

// AttemptFailed ends the attempt's span as failed: its class, and why the
// next channel is tried (or not).
func (r *Request) AttemptFailed(f Failure) {
	if r == nil || r.attempt == nil {
		return
	}
	fault := "request"
	if f.ChannelFault {
		fault = "channel"
	}
	attrs := []attribute.KeyValue{
		attribute.String("error.type", f.Type),
		FailureFault.String(fault),
		FailoverNext.Bool(f.ChannelFault),
		attribute.Int("gateway.response.status_code", f.Status),
	}
	if f.UpstreamStatus != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", f.UpstreamStatus))
	}
	r.attempt.SetAttributes(attrs...)
	r.attempt.SetStatus(codes.Error, f.Message)
	r.attempt.End()
	r.attempt = nil
}

// AttemptAnswered marks the attempt as answered with status; its span
// stays open until the answer ends (EndAttempt, or Finish).
func (r *Request) AttemptAnswered(status int) {
	if r == nil || r.attempt == nil {
		return
	}
	r.attempt.SetAttributes(attribute.Int("http.response.status_code", status))
}

// EndAttempt ends the attempt's span, if one is open.
func (r *Request) EndAttempt() {
	if r == nil || r.attempt == nil {
		return
	}
	r.attempt.End()
	r.attempt = nil
}

// FirstToken adds the event of the first streamed token, once, to the
// server span and to the attempt's.
func (r *Request) FirstToken() {
	if r == nil || r.firstSeen {
		return
	}
	r.firstSeen = true
	r.span.AddEvent(EventFirstToken)
	if r.attempt != nil {
		r.attempt.AddEvent(EventFirstToken)
	}
}

// ResponseModel records the model the upstream's answer named.
func (r *Request) ResponseModel(model string) {
	if r != nil && model != "" {
		r.respModel = model
	}
}

// FinishReason records why generation ended, in the gateway's neutral
// words (end, length, tool_calls, content_filter, refusal).
func (r *Request) FinishReason(reason string) {
	if r != nil && reason != "" {
		r.finish = reason
	}
}

// Summary is what the server span says of a settled request.
type Summary struct {
	Operation string // the GenAI operation name
	Provider  string // the answering channel's type; "" when none answered
	Channel   string
	Model     string // the model asked for
	Stream    bool

	InputTokens, OutputTokens, CachedTokens, ReasoningTokens int64
	Cost                                                     int64 // quota units
	UserID, TokenID                                          int64
	RequestID                                                string
	Status                                                   int
	Error                                                    string // the client's error message, when Status is not 2xx
}

// Finish annotates the server span with the settled request and ends the
// attempt's span if the answer kept it open. The server span itself is
// Caddy's to end.
func (r *Request) Finish(s Summary) {
	if r == nil {
		return
	}
	failed := s.Status < 200 || s.Status > 299
	if r.attempt != nil && failed {
		// the answer broke off after the upstream began it (a stream cut,
		// a timeout, a body too large): no other channel was tried
		r.attempt.SetAttributes(FailoverNext.Bool(false), attribute.Int("gateway.response.status_code", s.Status))
		r.attempt.SetStatus(codes.Error, s.Error)
	}
	r.EndAttempt()
	r.streamOutput()
	attrs := make([]attribute.KeyValue, 0, 20)
	attrs = append(attrs,
		OperationName.String(s.Operation),
		RequestModel.String(s.Model),
		Stream.Bool(s.Stream),
		UserID.Int64(s.UserID),
		TokenID.Int64(s.TokenID),
		Cost.Int64(s.Cost),
		attribute.Int("gateway.response.status_code", s.Status),
	)
	if s.RequestID != "" {
		attrs = append(attrs, RequestID.String(s.RequestID))
	}
	if s.Channel != "" {
		attrs = append(attrs, Channel.String(s.Channel))
		if s.Provider != "" {
			attrs = append(attrs, ProviderName.String(ProviderOf(s.Provider)))
		}
		if r.respModel != "" {
			attrs = append(attrs, ResponseModel.String(r.respModel))
		}
		attrs = append(attrs, InputTokens.Int64(s.InputTokens), OutputTokens.Int64(s.OutputTokens))
		if s.CachedTokens != 0 {
			attrs = append(attrs, CachedTokens.Int64(s.CachedTokens))
		}
		if s.ReasoningTokens != 0 {
			attrs = append(attrs, ReasoningTokens.Int64(s.ReasoningTokens))
		}
	}
	if r.finish != "" {
		attrs = append(attrs, FinishReasons.StringSlice([]string{FinishReasonOf(r.finish)}))
	}
	r.span.SetAttributes(attrs...)
	if failed {
		attrs := []attribute.KeyValue{attribute.String("error.type", strconv.Itoa(s.Status))}
		r.span.SetAttributes(attrs...)
		r.span.SetStatus(codes.Error, s.Error)
	}
}

// Response adds an event for one response of a long request (a Realtime
// session's span): its tokens, cost and status, and the session's
// attributes.
func (r *Request) Response(s Summary) {
	if r == nil {
		return
	}
	r.span.SetAttributes(OperationName.String(s.Operation), RequestModel.String(s.Model), Channel.String(s.Channel),
		UserID.Int64(s.UserID), TokenID.Int64(s.TokenID))
	if s.Provider != "" {
		r.span.SetAttributes(ProviderName.String(ProviderOf(s.Provider)))
	}
	r.span.AddEvent(EventResponse, trace.WithAttributes(InputTokens.Int64(s.InputTokens), OutputTokens.Int64(s.OutputTokens),
		Cost.Int64(s.Cost), attribute.Int("gateway.response.status_code", s.Status)))
}

// CleanURL is u without its query, fragment or user info: what a span may
// show of an upstream address.
func CleanURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return c.String()
}

// SpanName is a GenAI span's name: the operation, then the model.
func SpanName(operation, model string) string {
	if model == "" {
		return operation
	}
	return operation + " " + model
}

// Refused marks a request refused before the engine saw it (by its
// authentication): the span's status is the error the client was told.
// Nothing happens on an untraced request.
func Refused(ctx context.Context, status int, message string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)), attribute.Int("gateway.response.status_code", status))
	span.SetStatus(codes.Error, message)
}
