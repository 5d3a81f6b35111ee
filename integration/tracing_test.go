package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genai"
	"google.golang.org/protobuf/proto"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Traces: a site with Caddy's `tracing` exports, over OTLP/HTTP to a
// receiver run by the test, the gateway's spans: GenAI attributes on each
// request's server span, a client span per upstream attempt whose
// traceparent the upstream received, task submits and their polls, and
// never a key or (unless trace_content) a message.

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf), as a collector
// or Langfuse runs one: it keeps every span and the raw exports, for
// searching them for secrets.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	raw   [][]byte
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not a trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var ex coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &ex)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.raw = append(r.raw, raw)
	for _, rs := range ex.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// exportTraces starts a receiver and points the gateways the test starts
// at it: a gateway's process takes the test's environment, and the OTLP
// exporter Caddy's tracing makes is configured by it alone.
func exportTraces(t *testing.T) *otlpReceiver {
	otlp := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	return otlp
}

// trace is the spans received of one trace, by hex trace id.
func (r *otlpReceiver) trace(id string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// named is every span received whose name is name.
func (r *otlpReceiver) named(name string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// contains reports whether any export held s, anywhere (an attribute, an
// event, a status message, the resource).
func (r *otlpReceiver) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.raw, func(b []byte) bool { return bytes.Contains(b, []byte(s)) })
}

// waitTrace waits for a trace's server span and n client spans.
func (r *otlpReceiver) waitTrace(t *testing.T, id string, clients int) (server *tracepb.Span, attempts []*tracepb.Span) {
	t.Helper()
	eventually(t, fmt.Sprintf("trace %s with %d client spans", id, clients), func() bool {
		server, attempts = nil, nil
		for _, s := range r.trace(id) {
			switch s.Kind {
			case tracepb.Span_SPAN_KIND_SERVER:
				server = s
			case tracepb.Span_SPAN_KIND_CLIENT:
				attempts = append(attempts, s)
			}
		}
		return server != nil && len(attempts) >= clients
	})
	slices.SortFunc(attempts, func(a, b *tracepb.Span) int {
		return int(attr(a, "gateway.attempt").GetIntValue() - attr(b, "gateway.attempt").GetIntValue())
	})
	return server, attempts
}

// attr is a span's attribute of that key, nil when it has none.
func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// wantAttrs checks a span's string, int and bool attributes.
func wantAttrs(t *testing.T, s *tracepb.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got := attr(s, k)
		if got == nil {
			t.Errorf("span %q has no %s (want %v)", s.Name, k, v)
			continue
		}
		var ok bool
		switch v := v.(type) {
		case string:
			ok = got.GetStringValue() == v
		case int:
			ok = got.GetIntValue() == int64(v)
		case int64:
			ok = got.GetIntValue() == v
		case bool:
			ok = got.GetBoolValue() == v
		case []string:
			var vals []string
			for _, e := range got.GetArrayValue().GetValues() {
				vals = append(vals, e.GetStringValue())
			}
			ok = slices.Equal(vals, v)
		}
		if !ok {
			t.Errorf("span %q: %s = %v, want %v", s.Name, k, got, v)
		}
	}
}

func hasEvent(s *tracepb.Span, name string) bool {
	return slices.ContainsFunc(s.Events, func(e *tracepb.Span_Event) bool { return e.Name == name })
}

// wantParent checks that the upstream received the attempt span's context
// as its traceparent.
func wantTraceparent(t *testing.T, header http.Header, attempt *tracepb.Span) {
	t.Helper()
	want := "00-" + hex.EncodeToString(attempt.TraceId) + "-" + hex.EncodeToString(attempt.SpanId) + "-01"
	if got := header.Get("Traceparent"); got != want {
		t.Errorf("the upstream received traceparent %q, want the attempt span's %q", got, want)
	}
}

// headerTap forwards to a fake upstream and keeps the traceparent of each
// request, by method and path: the video fakes record no headers.
type headerTap struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string][]string // "GET /v1/videos/x" -> traceparents
}

func newHeaderTap(t *testing.T, target string) *headerTap {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &headerTap{seen: map[string][]string{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		k := r.Method + " " + r.URL.Path
		h.seen[k] = append(h.seen[k], r.Header.Get("Traceparent"))
		h.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *headerTap) traceparents(method, path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[method+" "+path])
}

// tracingSetup is the task gateway (tasks_test.go) with `tracing` on its
// site and exports going to the test's receiver; gpt-4o-mini fails over
// from the openai channel to openai-backup, and sora-2's channel is
// reached through a tap.
type tracingSetup struct {
	*taskSetup
	otlp *otlpReceiver
	tap  *headerTap
}

func startTracing(t *testing.T, options ...string) *tracingSetup {
	t.Helper()
	otlp := exportTraces(t)
	s := &tracingSetup{otlp: otlp, taskSetup: &taskSetup{openai: gatewaytest.NewFakeOpenAI(t, "sk-up-openai"),
		gemini: gatewaytest.NewFakeGemini(t, "sk-up-gemini"), backup: gatewaytest.NewFakeOpenAI(t, "sk-up-openai-2")}}
	s.tap = newHeaderTap(t, s.openai.URL)
	s.backup.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the backup" })
	dir := t.TempDir()
	s.vars = gatewaytest.Vars{"OPENAI": s.openai.URL, "OPENAI2": s.backup.URL, "GEMINI": s.gemini.URL, "TAP": s.tap.URL,
		"DB": dir + "/gateway.db", "JOURNAL": dir + "/journal-1"}
	s.cfg = taskOptions{}.config().
		channel("openai", "openai", "{{OPENAI}}", "sk-up-openai", "gpt-4o-mini text-embedding-3-small", "priority 10").
		channel("openai-backup", "openai", "{{OPENAI2}}", "sk-up-openai-2", "gpt-4o-mini").
		channel("sora", "openai", "{{TAP}}", "sk-up-openai", "sora-2").
		price("text-embedding-3-small", "input 0.02").
		withSite(block("tracing", "span gateway"), logToStderr, "@tasks path /api/generate/*",
			block("route @tasks", "gateway_auth", "gateway_tasks"),
			block("route /v1/*", "gateway_auth", "gateway_relay"),
			block("route /v1beta/*", "gateway_auth", "gateway_relay"))
	for _, o := range options {
		s.cfg = s.cfg.option(o)
	}
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	s.gw.DBPath = s.vars["DB"]
	return s
}

// secrets are the strings no span may hold: the client's key and every
// channel's.
func (s *tracingSetup) noSecrets(t *testing.T, key string) {
	t.Helper()
	for _, secret := range []string{key, "sk-up-openai", "sk-up-gemini"} {
		if s.otlp.contains(secret) {
			t.Errorf("a span holds the secret %q", secret)
		}
	}
}

func TestTracesOfRequests(t *testing.T) {
	s := startTracing(t)
	key := s.gw.AddUser("tracy", 50_000_000)
	user := s.gw.User("tracy")
	client := s.client(key)
	ctx := context.Background()
	const prompt = "the secret word is periwinkle"
	rows := 0
	nextRow := func() gatewaytest.UsageRow {
		t.Helper()
		rows++
		r := s.gw.WaitUsage("tracy", rows)[rows-1]
		if len(r.TraceID) != 32 {
			t.Fatalf("usage row %+v has no trace id", r)
		}
		return r
	}

	t.Run("streamed chat that fails over", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 503 })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 0 })
		params := chatParams("gpt-4o-mini", prompt)
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		for stream.Next() {
			if c := stream.Current(); len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
		if stream.Err() != nil || text.String() != "Hello from the backup" {
			t.Fatalf("stream: %q, %v", text.String(), stream.Err())
		}
		row := nextRow()
		server, attempts := s.otlp.waitTrace(t, row.TraceID, 2)
		if len(attempts) != 2 {
			t.Fatalf("%d attempt spans, want 2", len(attempts))
		}
		wantAttrs(t, server, map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
			"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": row.PromptTokens,
			"gen_ai.usage.output_tokens": row.CompletionTokens, "gen_ai.response.finish_reasons": []string{"stop"},
			"gateway.stream": true, "gateway.channel": "openai-backup", "gateway.cost_units": row.Cost,
			"gateway.user_id": user.ID, "gateway.key_id": row.TokenID, "gateway.request_id": row.RequestID,
		})
		if row.Cost <= 0 || row.PromptTokens <= 0 {
			t.Errorf("row %+v: want a charged row", row)
		}
		if !hasEvent(server, "gen_ai.first_token") || server.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("server span: events %v, status %v; want a first token and no error", server.Events, server.Status)
		}
		failed, answered := attempts[0], attempts[1]
		for _, a := range attempts {
			if !bytes.Equal(a.ParentSpanId, server.SpanId) {
				t.Errorf("attempt %q is not a child of the server span", a.Name)
			}
			if a.Name != "chat gpt-4o-mini" {
				t.Errorf("attempt span named %q", a.Name)
			}
		}
		wantAttrs(t, failed, map[string]any{"gateway.channel": "openai", "gateway.attempt": 1, "http.response.status_code": 503,
			"gateway.failover": true, "gateway.failure.fault": "channel", "gen_ai.provider.name": "openai",
			"url.full": s.openai.URL + "/v1/chat/completions", "http.request.method": "POST"})
		if failed.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || failed.Status.GetMessage() == "" {
			t.Errorf("failed attempt's status %v, want an error saying why", failed.Status)
		}
		wantAttrs(t, answered, map[string]any{"gateway.channel": "openai-backup", "gateway.attempt": 2, "http.response.status_code": 200})
		if answered.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || !hasEvent(answered, "gen_ai.first_token") {
			t.Errorf("answering attempt: status %v events %v", answered.Status, answered.Events)
		}
		up := s.openai.Requests()
		wantTraceparent(t, up[len(up)-1].Header, failed)
		up = s.backup.Requests()
		wantTraceparent(t, up[len(up)-1].Header, answered)
		// Caddy's access log line of the request names its trace
		if !strings.Contains(s.gw.Logs(), `"traceID":"`+row.TraceID+`"`) {
			t.Errorf("the access log does not name trace %s", row.TraceID)
		}
	})

	t.Run("anthropic call translated to an openai channel", func(t *testing.T) {
		ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt-4o-mini", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) == 0 || msg.Content[0].Text != "Hello from the fake upstream" {
			t.Fatalf("answer %+v", msg.Content)
		}
		row := nextRow()
		server, attempts := s.otlp.waitTrace(t, row.TraceID, 1)
		wantAttrs(t, server, map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
			"gen_ai.usage.input_tokens": row.PromptTokens, "gen_ai.usage.output_tokens": row.CompletionTokens,
			"gen_ai.response.finish_reasons": []string{"stop"}, "gateway.stream": false, "gateway.channel": "openai",
			"gateway.cost_units": row.Cost,
		})
		if len(attempts) != 1 || !bytes.Equal(attempts[0].ParentSpanId, server.SpanId) {
			t.Fatalf("attempts %v", attempts)
		}
		if !strings.Contains(s.gw.Logs(), `"traceID":"`+row.TraceID+`"`) {
			t.Errorf("the access log does not name trace %s", row.TraceID)
		}
		up := s.openai.Requests()
		if last := up[len(up)-1]; last.Path != "/v1/chat/completions" {
			t.Fatalf("the upstream was asked %s", last.Path)
		} else {
			wantTraceparent(t, last.Header, attempts[0])
		}
	})

	t.Run("gemini stream translated to an openai channel", func(t *testing.T) {
		gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.gw.URL}})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for resp, err := range gc.Models.GenerateContentStream(ctx, "gpt-4o-mini", genai.Text(prompt), nil) {
			if err != nil {
				t.Fatal(err)
			}
			text.WriteString(resp.Text())
		}
		if text.String() != "Hello from the fake upstream" {
			t.Fatalf("answer %q", text.String())
		}
		row := nextRow()
		server, attempts := s.otlp.waitTrace(t, row.TraceID, 1)
		wantAttrs(t, server, map[string]any{"gen_ai.operation.name": "generate_content", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.finish_reasons": []string{"stop"}, "gateway.stream": true,
			"gen_ai.usage.output_tokens": row.CompletionTokens})
		if !hasEvent(server, "gen_ai.first_token") || !hasEvent(attempts[0], "gen_ai.first_token") {
			t.Error("no first-token event on a translated stream")
		}
	})

	t.Run("embedding", func(t *testing.T) {
		if _, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{prompt}}}); err != nil {
			t.Fatal(err)
		}
		row := nextRow()
		server, attempts := s.otlp.waitTrace(t, row.TraceID, 1)
		wantAttrs(t, server, map[string]any{"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small",
			"gen_ai.usage.input_tokens": row.PromptTokens, "gateway.channel": "openai", "gateway.cost_units": row.Cost})
		wantAttrs(t, attempts[0], map[string]any{"url.full": s.openai.URL + "/v1/embeddings", "gen_ai.operation.name": "embeddings"})
	})

	t.Run("refused request", func(t *testing.T) {
		before := len(s.openai.Requests()) + len(s.backup.Requests())
		_, err := client.Chat.Completions.New(ctx, chatParams("no-such-model", prompt))
		if e := sdkError(t, err); e.StatusCode/100 != 4 {
			t.Fatalf("status %d", e.StatusCode)
		}
		row := nextRow()
		server, _ := s.otlp.waitTrace(t, row.TraceID, 0)
		wantAttrs(t, server, map[string]any{"gen_ai.request.model": "no-such-model", "gateway.cost_units": 0,
			"error.type": fmt.Sprint(row.Status), "gateway.request_id": row.RequestID})
		if server.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || server.Status.GetMessage() != row.Error {
			t.Errorf("refused request's span status %v, want an error saying %q", server.Status, row.Error)
		}
		if n := len(s.otlp.trace(row.TraceID)); n != 1 || len(s.openai.Requests())+len(s.backup.Requests()) != before {
			t.Errorf("a refused request made %d spans and reached an upstream", n)
		}

		// a key the gateway does not know: refused before any model is
		// read, its span an error all the same
		_, err = s.client("sk-not-a-gateway-key").Chat.Completions.New(ctx, chatParams("gpt-4o-mini", prompt))
		if e := sdkError(t, err); e.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", e.StatusCode)
		}
		eventually(t, "the refused key's span", func() bool {
			for _, sp := range s.otlp.named("gateway") {
				if attr(sp, "gateway.response.status_code").GetIntValue() == http.StatusUnauthorized &&
					sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR && strings.Contains(sp.Status.GetMessage(), "not valid") {
					return true
				}
			}
			return false
		})
	})

	t.Run("task submit and polls", func(t *testing.T) {
		sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"`+prompt+`","duration":4}`)
		job := s.openai.Videos.Last(t)
		s.openai.Videos.Finish(job.ID)
		waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
		row := nextRow()
		server, attempts := s.otlp.waitTrace(t, row.TraceID, 1)
		wantAttrs(t, server, map[string]any{"gen_ai.operation.name": "submit_task", "gen_ai.request.model": "sora-2",
			"gateway.task_id": sub.Data.TaskID, "gateway.channel": "sora", "gateway.user_id": user.ID,
			"gen_ai.provider.name": "openai"})
		wantAttrs(t, attempts[0], map[string]any{"gen_ai.operation.name": "submit_task", "gateway.channel": "sora",
			"url.full": s.tap.URL + "/v1/videos"})
		if tp := s.tap.traceparents(http.MethodPost, "/v1/videos"); len(tp) != 1 {
			t.Fatalf("submits seen: %v", tp)
		} else {
			wantTraceparent(t, http.Header{"Traceparent": tp}, attempts[0])
		}
		// each poll is a span of its own, linked to the submit's span, and
		// its traceparent went to the vendor
		var polls []*tracepb.Span
		eventually(t, "poll spans", func() bool {
			polls = s.otlp.named("poll_task sora-2")
			return len(polls) > 0
		})
		sent := s.tap.traceparents(http.MethodGet, "/v1/videos/"+job.ID)
		for _, p := range polls {
			if len(p.Links) != 1 || !bytes.Equal(p.Links[0].TraceId, server.TraceId) || !bytes.Equal(p.Links[0].SpanId, server.SpanId) {
				t.Errorf("poll span links %v, want the submit's span", p.Links)
			}
			wantAttrs(t, p, map[string]any{"gateway.task_id": sub.Data.TaskID, "gateway.channel": "sora"})
			want := "00-" + hex.EncodeToString(p.TraceId) + "-" + hex.EncodeToString(p.SpanId) + "-01"
			if !slices.Contains(sent, want) {
				t.Errorf("poll %s's traceparent never reached the vendor (it saw %v)", want, sent)
			}
		}
		if !slices.ContainsFunc(polls, func(p *tracepb.Span) bool { return attr(p, "gateway.task.status").GetStringValue() == "finished" }) {
			t.Errorf("no poll saw the task finished")
		}
	})

	// no key and, without trace_content, no message anywhere in a span
	s.noSecrets(t, key)
	if s.otlp.contains("sk-not-a-gateway-key") {
		t.Error("a span holds the refused key")
	}
	if s.otlp.contains("periwinkle") || s.otlp.contains("Hello from the") {
		t.Error("a span holds message content though trace_content is off")
	}
}

func TestTraceContent(t *testing.T) {
	s := startTracing(t, "trace_content 2KB")
	key := s.gw.AddUser("tracy", 50_000_000)
	client := s.client(key)
	ctx := context.Background()
	image := "data:image/png;base64," + "iVBORw0KGBwAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("answer in one line"),
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("what is in this picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: image}),
		}),
	}}
	if _, err := client.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("lorem ipsum ", 400) // 4,800 bytes
	if _, err := client.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", long)); err != nil {
		t.Fatal(err)
	}
	// a stream relayed as the upstream sent it is read aside for its text
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("gpt-4o-mini", "stream please"))
	for stream.Next() {
	}
	if stream.Err() != nil {
		t.Fatal(stream.Err())
	}
	rows := s.gw.WaitUsage("tracy", 3)

	server, _ := s.otlp.waitTrace(t, rows[2].TraceID, 1)
	if out := attr(server, "gen_ai.output.messages").GetStringValue(); out != `[{"role":"assistant","parts":[{"type":"text","content":"Hello from the fake upstream"}],"finish_reason":"stop"}]` {
		t.Errorf("streamed output messages %s", out)
	}

	server, _ = s.otlp.waitTrace(t, rows[0].TraceID, 1)
	in := attr(server, "gen_ai.input.messages").GetStringValue()
	want := `[{"role":"user","parts":[{"type":"text","content":"what is in this picture?"},{"type":"image"}]}]`
	if in != want {
		t.Errorf("input messages %s, want %s", in, want)
	}
	if sys := attr(server, "gen_ai.system_instructions").GetStringValue(); sys != `[{"type":"text","content":"answer in one line"}]` {
		t.Errorf("system instructions %s", sys)
	}
	out := attr(server, "gen_ai.output.messages").GetStringValue()
	if out != `[{"role":"assistant","parts":[{"type":"text","content":"Hello from the fake upstream"}],"finish_reason":"stop"}]` {
		t.Errorf("output messages %s", out)
	}
	if attr(server, "gateway.content_truncated") != nil {
		t.Error("a short conversation is marked truncated")
	}

	server, _ = s.otlp.waitTrace(t, rows[1].TraceID, 1)
	in = attr(server, "gen_ai.input.messages").GetStringValue()
	if len(in) == 0 || len(in) > 2048 || !strings.HasPrefix(in, `[{"role":"user","parts":[{"type":"text","content":"lorem ipsum`) {
		t.Errorf("long input recorded as %d bytes: %.80s", len(in), in)
	}
	wantAttrs(t, server, map[string]any{"gateway.content_truncated": true})

	// image data and keys never, whatever trace_content says
	if s.otlp.contains(image[len("data:image/png;base64,"):][:16]) || s.otlp.contains("base64,") {
		t.Error("a span holds the image's data")
	}
	s.noSecrets(t, key)
}

// A Realtime session is its upgrade request's server span, with an event
// per response; the handshake upstream is a client span whose traceparent
// the upstream received.
func TestTraceRealtimeSession(t *testing.T) {
	otlp := exportTraces(t)
	s := &realtimeSetup{fake: gatewaytest.NewFakeOpenAI(t, "sk-rt-upstream")}
	s.fake.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the realtime fake" })
	s.fake.SetRealtimeUsage(realtimeTurn)
	claude := gatewaytest.NewFakeAnthropic(t, "claude-rt-upstream")
	s.vars = gatewaytest.Vars{"OPENAI": s.fake.BaseURL(), "CLAUDE": claude.BaseURL()}
	s.gw = gatewaytest.Start(t, realtimeConfig("h1").withSite("tracing", relayRoute).String(), s.vars)
	key := s.gw.AddUser("rae", 10_000_000)

	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if ev := readEvent(t, c); ev.Type != "session.created" {
		t.Fatalf("first event %s", ev.Raw)
	}
	exchangeTurn(t, c, false)
	exchangeTurn(t, c, false)
	rows := s.gw.WaitUsage("rae", 2)
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	if rows[0].TraceID == "" || rows[1].TraceID != rows[0].TraceID {
		t.Fatalf("the session's rows name traces %q and %q, want its one", rows[0].TraceID, rows[1].TraceID)
	}
	server, attempts := otlp.waitTrace(t, rows[0].TraceID, 1)
	wantAttrs(t, server, map[string]any{"gen_ai.operation.name": "realtime", "gen_ai.request.model": realtimeModel,
		"gateway.channel": "oai", "gen_ai.provider.name": "openai"})
	var responses []*tracepb.Span_Event
	for _, e := range server.Events {
		if e.Name == "gen_ai.response" {
			responses = append(responses, e)
		}
	}
	if len(responses) != 2 {
		t.Fatalf("the session's span has %d response events, want 2", len(responses))
	}
	for _, e := range responses {
		ev := &tracepb.Span{Name: "event", Attributes: e.Attributes}
		wantAttrs(t, ev, map[string]any{"gen_ai.usage.input_tokens": 600, "gen_ai.usage.output_tokens": 250, "gateway.cost_units": realtimeTurnCost})
	}
	wantAttrs(t, attempts[0], map[string]any{"gen_ai.operation.name": "realtime", "gateway.channel": "oai", "http.response.status_code": 101})
	if !bytes.Equal(attempts[0].ParentSpanId, server.SpanId) {
		t.Error("the handshake's span is not a child of the session's")
	}
	wantTraceparent(t, s.fake.Requests()[0].Header, attempts[0])
	for _, secret := range []string{key, "sk-rt-upstream"} {
		if otlp.contains(secret) {
			t.Errorf("a span holds the secret %q", secret)
		}
	}
}

// client is an OpenAI client of the gateway with key.
func (s *tracingSetup) client(key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

// TestTraceSpanNamedFromURIHoldsNoKey: a site that names its server span
// after the request's URI (`tracing { span {http.request.uri} }`) gets the
// URI as stripped: a Gemini client's ?key= is in no span, nor its name.
func TestTraceSpanNamedFromURIHoldsNoKey(t *testing.T) {
	s := startTracing(t)
	s.cfg = s.cfg.withSite(block("tracing", "span {http.request.uri}"), logToStderr,
		block("route /v1beta/*", "gateway_auth", "gateway_relay"))
	s.gw.Reload(s.cfg.String(), s.vars)
	key := s.gw.AddUser("uri", 50_000_000)
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	resp, b := s.gw.Do(http.MethodPost, "/v1beta/models/gpt-4o-mini:generateContent?alt=json&key="+key, "", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("generateContent: %d %s", resp.StatusCode, b)
	}
	row := s.gw.WaitUsage("uri", 1)[0]
	server, _ := s.otlp.waitTrace(t, row.TraceID, 1)
	if server.Name != "/v1beta/models/gpt-4o-mini:generateContent?alt=json" {
		t.Errorf("the server span is named %q, want the URI as stripped", server.Name)
	}
	s.noSecrets(t, key)
}
