package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// faultsConfig: for gpt-4o-mini a primary and a backup with short
// timeouts and small bounds, so every fault ends in well under a second;
// one channel per vendor shape that refuses the channel itself (gem, ant,
// oai); and "slow", whose only channel has a short whole-answer timeout.
func faultsConfig() *caddyfile {
	return gatewayConfig().
		option("max_attempts 4").
		option(block("health", "consecutive_failures 2", "base_ejection 1m", "max_ejection 5m")).
		channel("primary", "openai", "{{UP1}}", "sk-up-fault-1", "gpt-4o-mini",
			"priority 10",
			"response_header_timeout 300ms",
			"stream_idle_timeout 300ms",
			"max_response_body 8MB",
			"max_stream_event 1MB").
		channel("backup", "openai", "{{UP2}}", "sk-up-fault-2", "gpt-4o-mini gem-fo").
		channel("gem", "gemini", "{{GEM}}", "sk-up-fault-gem", "gem gem-fo", "priority 30").
		channel("ant", "anthropic", "{{ANT}}", "sk-up-fault-ant", "ant gem-fo", "priority 20").
		channel("oai", "openai", "{{OAI}}", "sk-up-fault-oai", "oai gem-fo", "priority 10").
		channel("slowpoke", "openai", "{{SLOW}}", "sk-up-fault-slow", "slow", "timeout 300ms").
		free("gpt-4o-mini", "gem", "ant", "oai", "gem-fo", "slow").
		withSite(logToStderr, relayRoute)
}

type faultSetup struct {
	gw                                   *gatewaytest.Gateway
	primary, backup, gem, ant, oai, slow *gatewaytest.FakeOpenAI
	key                                  string
	client                               *openai.Client
}

func startFaults(t *testing.T) *faultSetup {
	t.Helper()
	s := &faultSetup{
		primary: gatewaytest.NewFakeOpenAI(t, "sk-up-fault-1"),
		backup:  gatewaytest.NewFakeOpenAI(t, "sk-up-fault-2"),
		gem:     gatewaytest.NewFakeOpenAI(t, "sk-up-fault-gem"),
		ant:     gatewaytest.NewFakeOpenAI(t, "sk-up-fault-ant"),
		oai:     gatewaytest.NewFakeOpenAI(t, "sk-up-fault-oai"),
		slow:    gatewaytest.NewFakeOpenAI(t, "sk-up-fault-slow"),
	}
	s.backup.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the backup" })
	s.gw = gatewaytest.Start(t, faultsConfig().String(), gatewaytest.Vars{"UP1": s.primary.URL, "UP2": s.backup.URL,
		"GEM": s.gem.URL, "ANT": s.ant.URL, "OAI": s.oai.URL, "SLOW": s.slow.URL})
	s.key = s.gw.AddUser("fault", 1_000_000)
	c := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(s.key), option.WithMaxRetries(0))
	s.client = &c
	return s
}

func (s *faultSetup) chat(t *testing.T, model string) (*openai.ChatCompletion, error) {
	t.Helper()
	return s.client.Chat.Completions.New(context.Background(), chatParams(model, "hi"))
}

// streamText reads a stream to its end: the text and the error it ended with.
func (s *faultSetup) streamText(t *testing.T, model string) (string, error) {
	t.Helper()
	stream := s.client.Chat.Completions.NewStreaming(context.Background(), chatParams(model, "hi"))
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String(), stream.Err()
}

// channelStates reads GET /gateway/channels from the admin endpoint.
func channelStates(t *testing.T, gw *gatewaytest.Gateway) map[string]map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + gw.Admin + "/gateway/channels")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("channel states: %v", err)
	}
	out := map[string]map[string]any{}
	for _, c := range list {
		out[c["name"].(string)] = c
	}
	return out
}

// TestUpstreamHangsBeforeHeaders: a primary that never answers is given up
// after response_header_timeout and the backup answers; after
// consecutive_failures such failures it is ejected, so it sees no more
// requests, and the admin endpoint shows it ejected.
func TestUpstreamHangsBeforeHeaders(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.HangBeforeHeaders = true })
	for i := range 4 {
		resp, err := s.chat(t, "gpt-4o-mini")
		if err != nil || resp.Choices[0].Message.Content != "Hello from the backup" {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
	}
	// streams fail over the same way
	if text, err := s.streamText(t, "gpt-4o-mini"); err != nil || text != "Hello from the backup" {
		t.Fatalf("stream: %q %v", text, err)
	}
	if n := len(s.primary.Requests()); n != 2 {
		t.Fatalf("the hanging primary got %d requests, want 2 (then ejected)", n)
	}
	st := channelStates(t, s.gw)
	if st["primary"]["ejected"] != true || st["backup"]["ejected"] != false || st["primary"]["ejections"].(float64) != 1 {
		t.Fatalf("channel states = %v", st)
	}
}

// TestUpstreamHangsMidStream: an upstream that goes silent after some
// events ends the client's stream with an error event, not a clean end.
func TestUpstreamHangsMidStream(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.Reply = "a b c d e f"; b.HangAfter = 3 })
	text, err := s.streamText(t, "gpt-4o-mini")
	if err == nil || !strings.Contains(err.Error(), "stream_idle_timeout") {
		t.Fatalf("a silent upstream must end the stream with an error, got text %q err %v", text, err)
	}
	if text != "a b " {
		t.Fatalf("text before the silence = %q", text)
	}
	if len(s.backup.Requests()) != 0 {
		t.Fatal("retried on another channel after bytes were sent")
	}
	if r := s.gw.WaitUsage("fault", 1)[0]; r.Status != http.StatusGatewayTimeout {
		t.Fatalf("usage row = %+v, want status 504", r)
	}
}

// TestErrorAsFirstEvent: an upstream whose stream opens with an error
// fails over like a status error, before the client sees any header.
func TestErrorAsFirstEvent(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) {
		b.FirstEvent = `{"error":{"message":"The server is overloaded, org-secret123","type":"server_error","code":null}}`
	})
	if text, err := s.streamText(t, "gpt-4o-mini"); err != nil || text != "Hello from the backup" {
		t.Fatalf("stream: %q %v", text, err)
	}
	if len(s.primary.Requests()) != 1 || len(s.backup.Requests()) != 1 {
		t.Fatalf("requests: primary %d backup %d", len(s.primary.Requests()), len(s.backup.Requests()))
	}
	// with no channel left, the client sees the gateway's words only
	s.backup.Set(func(b *gatewaytest.Behavior) { b.FirstEvent = s.primaryFirstEvent() })
	_, err := s.streamText(t, "gpt-4o-mini")
	e := apiError(t, err, http.StatusBadGateway, "")
	if strings.Contains(e.Message, "org-secret123") {
		t.Fatalf("the upstream's text reached the client: %q", e.Message)
	}
}

func (s *faultSetup) primaryFirstEvent() string {
	return `{"error":{"message":"The server is overloaded, org-secret123","type":"server_error","code":null}}`
}

// TestChannelFaultsByContent: Gemini's 400 API_KEY_INVALID, Anthropic's
// 402 billing_error and OpenAI's 429 insufficient_quota are the channel's
// fault: the request fails over, and alone they are a 502 to the client in
// the gateway's words, never a 400, 401 or 429 quoting the upstream.
func TestChannelFaultsByContent(t *testing.T) {
	s := startFaults(t)
	s.gem.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus = 400
		b.FailBody = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key. sk-up-fault-gem","status":"INVALID_ARGUMENT",` +
			`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	})
	s.ant.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus = 402
		b.FailBody = `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low for org-77."}}`
	})
	s.oai.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus = 429
		b.FailBody = `{"error":{"message":"You exceeded your current quota, org-88.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	})
	// gem-fo: gem, then ant, then oai, then the backup, which answers
	resp, err := s.chat(t, "gem-fo")
	if err != nil || resp.Choices[0].Message.Content != "Hello from the backup" {
		t.Fatalf("failover past three refused channels: %v %v", resp, err)
	}
	for _, f := range []*gatewaytest.FakeOpenAI{s.gem, s.ant, s.oai} {
		if len(f.Requests()) != 1 {
			t.Fatalf("each refusing channel should have been tried once")
		}
	}
	for _, model := range []string{"gem", "ant", "oai"} {
		_, err := s.chat(t, model)
		e := apiError(t, err, http.StatusBadGateway, "")
		for _, leak := range []string{"API key not valid", "sk-up-fault", "credit balance", "org-77", "org-88", "exceeded your current quota"} {
			if strings.Contains(e.Message, leak) {
				t.Fatalf("%s: the client saw the upstream's words: %q", model, e.Message)
			}
		}
	}
	// the upstream's text is in the log, with the channel's key masked
	logs := waitLog(t, s.gw.Logs, "Your credit balance is too low")
	if strings.Contains(logs, "sk-up-fault-gem") {
		t.Fatal("the upstream's text should be logged, with no key in it")
	}
}

// TestRetryAfterEjects: a 429 with Retry-After ejects the channel for that
// long at once, though consecutive_failures is 2.
func TestRetryAfterEjects(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus = 429
		b.FailBody = `{"error":{"message":"Rate limit reached for org-1","type":"requests","code":"rate_limit_exceeded"}}`
		b.FailHeader = http.Header{"Retry-After": {"60"}}
	})
	for i := range 3 {
		if resp, err := s.chat(t, "gpt-4o-mini"); err != nil || resp.Choices[0].Message.Content != "Hello from the backup" {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := len(s.primary.Requests()); n != 1 {
		t.Fatalf("the rate-limited primary got %d requests, want 1", n)
	}
	if st := channelStates(t, s.gw); st["primary"]["ejected"] != true {
		t.Fatalf("primary not ejected: %v", st["primary"])
	}
	m := s.gw.Metrics()
	if up, down := m[`gateway_channel_up{channel="backup"}`], m[`gateway_channel_up{channel="primary"}`]; up != 1 || down != 0 {
		t.Fatalf("gateway_channel_up: backup %v, primary %v; want 1 and 0", up, down)
	}
	// every channel ejected: they are tried anyway, and the client is told
	// in the gateway's words
	s.backup.Set(func(b *gatewaytest.Behavior) {
		b.FailStatus = 429
		b.FailBody = `{"error":{"message":"Rate limit reached for org-2","type":"requests","code":"rate_limit_exceeded"}}`
		b.FailHeader = http.Header{"Retry-After": {"60"}}
	})
	_, _ = s.chat(t, "gpt-4o-mini")
	_, err := s.chat(t, "gpt-4o-mini")
	e := apiError(t, err, http.StatusTooManyRequests, "upstream_rate_limited")
	if strings.Contains(e.Message, "org-") || len(s.primary.Requests()) != 2 {
		t.Fatalf("message %q; primary requests %d, want 2 (all ejected: tried anyway)", e.Message, len(s.primary.Requests()))
	}
}

// TestRedirectNotFollowed: an upstream that redirects is a failed channel;
// the key never reaches the host the redirect names.
func TestRedirectNotFollowed(t *testing.T) {
	s := startFaults(t)
	elsewhere := gatewaytest.NewFakeOpenAI(t, "sk-up-fault-1")
	s.primary.Set(func(b *gatewaytest.Behavior) { b.RedirectTo = elsewhere.URL + "/v1/chat/completions" })
	if resp, err := s.chat(t, "gpt-4o-mini"); err != nil || resp.Choices[0].Message.Content != "Hello from the backup" {
		t.Fatalf("%v %v", resp, err)
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Fatalf("the redirect was followed: %d requests reached the other host", n)
	}
}

// TestHugeBody: a 100 MB answer past max_response_body is a 502, read no
// further than the limit.
func TestHugeBody(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.HugeBody = 100 << 20 })
	_, err := s.chat(t, "gpt-4o-mini")
	e := apiError(t, err, http.StatusBadGateway, "")
	if !strings.Contains(e.Message, "max_response_body") {
		t.Fatalf("message = %q", e.Message)
	}
}

// TestLongStreamEvent: an SSE line past max_stream_event ends the stream
// with an error event.
func TestLongStreamEvent(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.LongEvent = 2 << 20 })
	_, err := s.streamText(t, "gpt-4o-mini")
	if err == nil || !strings.Contains(err.Error(), "max_stream_event") {
		t.Fatalf("err = %v, want an error event naming max_stream_event", err)
	}
	if r := s.gw.WaitUsage("fault", 1)[0]; r.Status != http.StatusBadGateway {
		t.Fatalf("usage row = %+v", r)
	}
}

// TestWholeAnswerTimeout: a non-streamed answer that takes longer than the
// channel's timeout is a 504.
func TestWholeAnswerTimeout(t *testing.T) {
	s := startFaults(t)
	s.slow.Set(func(b *gatewaytest.Behavior) { b.HangBeforeHeaders = true })
	_, err := s.chat(t, "slow")
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("err = %v, want a 504", err)
	}
}

// TestClientGoneStopsFailover: when the client hangs up while a channel
// is being tried, no other channel is tried for it.
func TestClientGoneStopsFailover(t *testing.T) {
	s := startFaults(t)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.HangBeforeHeaders = true })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.client.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi"))
		done <- err
	}()
	for len(s.primary.Requests()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if r := s.gw.WaitUsage("fault", 1)[0]; r.Status != 499 {
		t.Fatalf("usage row = %+v, want status 499", r)
	}
	if n := len(s.backup.Requests()); n != 0 {
		t.Fatalf("the backup got %d requests after the client left", n)
	}
}
