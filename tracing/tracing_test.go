package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// serverSpan starts a recording span as Caddy's tracing handler would,
// and returns its context and the exporter that receives it.
func serverSpan(t *testing.T) (context.Context, trace.Span, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("caddy").Start(context.Background(), "handler", trace.WithSpanKind(trace.SpanKindServer))
	return ctx, span, exp
}

func attrOf(attrs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Without a recording span (a site with no `tracing`) a request is not
// traced, and finding that out allocates nothing.
func TestBeginUntracedDoesNoWork(t *testing.T) {
	ctx := context.Background()
	if r := Begin(ctx, 1024); r != nil {
		t.Fatal("traced without a span")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Begin(ctx, 1024) }); n != 0 {
		t.Fatalf("Begin allocates %.0f times without tracing", n)
	}
	// every method is safe on the nil request
	var r *Request
	r.StartAttempt(Attempt{}, "", nil, nil)
	r.AttemptFailed(Failure{})
	r.FirstToken()
	r.Input(&adapters.Request{})
	r.Finish(Summary{})
	if r.TraceID() != "" || r.Recording() {
		t.Fatal("the nil request says it traces")
	}
}

// An attempt is a client span under the server span; the upstream gets
// its traceparent, and the URL recorded has no query (a key may be there).
func TestAttemptSpan(t *testing.T) {
	ctx, server, exp := serverSpan(t)
	r := Begin(ctx, 0)
	u, _ := url.Parse("https://user:pass@upstream.example:8443/v1beta/models/m:generateContent?key=AIza-secret")
	h := http.Header{}
	r.StartAttempt(Attempt{Operation: "chat", Model: "m", Channel: "c1", Provider: "gemini", Number: 1}, http.MethodPost, u, h)
	r.AttemptFailed(Failure{Status: 503, UpstreamStatus: 503, Type: "api_error", ChannelFault: true, Message: "overloaded"})
	r.StartAttempt(Attempt{Operation: "chat", Model: "m", Channel: "c2", Provider: "openai", Number: 2}, http.MethodPost, u, h)
	r.FirstToken()
	r.Finish(Summary{Operation: "chat", Channel: "c2", Provider: "openai", Model: "m", Status: 200})
	server.End()

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	first := spans[0]
	if first.Parent.SpanID() != server.SpanContext().SpanID() || first.SpanKind != trace.SpanKindClient {
		t.Fatalf("attempt span parent %v kind %v", first.Parent.SpanID(), first.SpanKind)
	}
	if v, _ := attrOf(first.Attributes, "url.full"); v.AsString() != "https://upstream.example:8443/v1beta/models/m:generateContent" {
		t.Errorf("url.full = %q", v.AsString())
	}
	if v, _ := attrOf(first.Attributes, ProviderName); v.AsString() != "gcp.gemini" {
		t.Errorf("provider = %q", v.AsString())
	}
	if v, _ := attrOf(first.Attributes, FailoverNext); !v.AsBool() {
		t.Error("the failed attempt does not say the next channel was tried")
	}
	second := spans[1]
	want := "00-" + second.SpanContext.TraceID().String() + "-" + second.SpanContext.SpanID().String() + "-01"
	if got := h.Get("traceparent"); got != want {
		t.Errorf("traceparent %q, want the last attempt's %q", got, want)
	}
	if len(second.Events) != 1 || second.Events[0].Name != EventFirstToken {
		t.Errorf("answering attempt's events %v", second.Events)
	}
}

// trace_content records the conversation as the conventions shape it, cut
// to its size on a character's boundary; images go without their data.
func TestContentRecordedAndCut(t *testing.T) {
	ctx, server, exp := serverSpan(t)
	r := Begin(ctx, 100)
	r.Input(&adapters.Request{Chat: &adapters.ChatRequest{Messages: []adapters.Message{{Role: "user", Parts: []adapters.Part{
		{Type: adapters.PartImage, Image: &adapters.Image{URL: "data:image/png;base64,AAAA"}},
		{Type: adapters.PartText, Text: strings.Repeat("é", 40)},
	}}}}})
	r.Observe(&adapters.StreamEvent{Type: adapters.EventTextDelta, Text: "Hi"})
	r.Observe(&adapters.StreamEvent{Type: adapters.EventFinish, StopReason: adapters.StopLength})
	r.Finish(Summary{Status: 200})
	server.End()
	attrs := exp.GetSpans()[0].Attributes
	in, _ := attrOf(attrs, InputMessages)
	s := in.AsString()
	if len(s) > 100 || !utf8.ValidString(s) || !strings.HasPrefix(s, `[{"role":"user","parts":[{"type":"image"},{"type":"text","content":"éé`) {
		t.Errorf("input messages %q (%d bytes)", s, len(s))
	}
	if strings.Contains(s, "AAAA") {
		t.Error("the image's data was recorded")
	}
	if cut, _ := attrOf(attrs, ContentCut); !cut.AsBool() {
		t.Error("a cut message is not marked so")
	}
	out, _ := attrOf(attrs, OutputMessages)
	if out.AsString() != `[{"role":"assistant","parts":[{"type":"text","content":"Hi"}],"finish_reason":"length"}]` {
		t.Errorf("output messages %s", out.AsString())
	}
	fr, _ := attrOf(attrs, FinishReasons)
	if got := fr.AsStringSlice(); len(got) != 1 || got[0] != "length" {
		t.Errorf("finish reasons %v", got)
	}
}

// Without trace_content nothing of a message is recorded.
func TestNoContentByDefault(t *testing.T) {
	ctx, server, exp := serverSpan(t)
	r := Begin(ctx, 0)
	r.Input(&adapters.Request{Chat: &adapters.ChatRequest{Messages: []adapters.Message{{Role: "user", Parts: []adapters.Part{{Type: adapters.PartText, Text: "secret"}}}}}})
	r.Observe(&adapters.StreamEvent{Type: adapters.EventTextDelta, Text: "answer"})
	r.Finish(Summary{Status: 200})
	server.End()
	for _, kv := range exp.GetSpans()[0].Attributes {
		if strings.Contains(kv.Value.String(), "secret") || strings.Contains(kv.Value.String(), "answer") {
			t.Errorf("%s holds content: %s", kv.Key, kv.Value.String())
		}
	}
}

// BenchmarkBeginUntraced is what an untraced request pays for tracing:
// one look for a span through a context as deep as a Caddy request's.
func BenchmarkBeginUntraced(b *testing.B) {
	type key int
	ctx := context.Background()
	for i := range 24 {
		ctx = context.WithValue(ctx, key(i), i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if Begin(ctx, 0) != nil {
			b.Fatal("traced")
		}
	}
}

// An answer that breaks off after the upstream began it fails its
// attempt's span too, with no failover.
func TestAnswerBrokenMidway(t *testing.T) {
	ctx, server, exp := serverSpan(t)
	r := Begin(ctx, 0)
	u, _ := url.Parse("http://upstream.example/v1/chat/completions")
	r.StartAttempt(Attempt{Operation: "chat", Model: "m", Channel: "c1", Provider: "openai", Number: 1}, http.MethodPost, u, http.Header{})
	r.AttemptAnswered(200)
	r.FirstToken()
	r.Finish(Summary{Operation: "chat", Channel: "c1", Provider: "openai", Model: "m", Status: 502, Error: "the upstream stream broke off"})
	server.End()
	spans := exp.GetSpans()
	attempt, srv := spans[0], spans[1]
	if attempt.Status.Code.String() != "Error" || attempt.Status.Description != "the upstream stream broke off" {
		t.Errorf("attempt status %v", attempt.Status)
	}
	if v, _ := attrOf(attempt.Attributes, FailoverNext); v.AsBool() {
		t.Error("a broken answer says the next channel was tried")
	}
	if srv.Status.Code.String() != "Error" {
		t.Errorf("server status %v", srv.Status)
	}
}
