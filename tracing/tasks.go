package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Enabled says whether background work (a task's polls) is traced: once a
// traced request has come in, the provider of Caddy's `tracing` is known.
// A process whose sites have no `tracing` never traces a poll.
func Enabled() bool { return seen.Load() != nil }

// Poll is the span of one poll of a task: a trace of its own (a poll may
// come hours after the submit), linked to the submit's span.
type Poll struct {
	span trace.Span
}

// StartPoll starts a poll's span, linked to the submit's span (traceID
// and spanID, hex; a submit that was not traced gives no link). Nil when
// tracing is not enabled.
func StartPoll(taskID, model, channel, provider, traceID, spanID string) *Poll {
	b := seen.Load()
	if b == nil {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithNewRoot(),
		trace.WithAttributes(OperationName.String("poll_task"), TaskID.String(taskID), RequestModel.String(model),
			Channel.String(channel), ProviderName.String(ProviderOf(provider)))}
	tid, terr := trace.TraceIDFromHex(traceID)
	sid, serr := trace.SpanIDFromHex(spanID)
	if terr == nil && serr == nil {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("gateway.link", "task_submit")}}))
	}
	_, span := b.tp.Tracer(scope).Start(context.Background(), SpanName("poll_task", model), opts...)
	return &Poll{span: span}
}

// Upstream records the poll's upstream request and sends its traceparent.
func (p *Poll) Upstream(r *http.Request) {
	if p != nil {
		upstream(p.span, r.Method, r.URL, r.Header)
	}
}

// End ends the poll's span with the task's status as the vendor gave it,
// or the poll's error (in the gateway's words).
func (p *Poll) End(status string, progress int, errMsg string) {
	if p == nil {
		return
	}
	if status != "" {
		p.span.SetAttributes(TaskStatus.String(status), attribute.Int("gateway.task.progress", progress))
	}
	if errMsg != "" {
		p.span.SetStatus(codes.Error, errMsg)
	}
	p.span.End()
}

// Task records a task's id and outcome on a traced submit's server span.
func (r *Request) Task(taskID string) {
	if r != nil && taskID != "" {
		r.span.SetAttributes(TaskID.String(taskID))
	}
}
