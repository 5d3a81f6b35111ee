package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Streams whose usage is written with spaces, and streams whose client
// leaves before the upstream's final usage: both billed the upstream's own
// counts (reservationConfig's prices: 1 unit a prompt token, 2 an output
// token).

// TestStreamedSpacedUsageIsBilled: an upstream that writes its usage chunk
// as Python's json.dumps does ("usage": {"prompt_tokens": 1200, ...}) is
// billed that usage, not the gateway's estimate.
func TestStreamedSpacedUsageIsBilled(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	up.Set(func(b *gatewaytest.Behavior) {
		b.Reply, b.PromptTokens, b.CompletionTokens, b.SpacedJSON = "Hello there", 1200, 300, true
	})
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("sally", 1_000_000_000)
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	p := chatParams("gpt-x", "hi")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	var text strings.Builder
	var seen openai.CompletionUsage
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage.PromptTokens != 0 {
			seen = ch.Usage
		}
	}
	if err := stream.Err(); err != nil || text.String() != "Hello there" {
		t.Fatalf("stream: %q %v", text.String(), err)
	}
	if seen.PromptTokens != 1200 || seen.CompletionTokens != 300 {
		t.Fatalf("the client's usage chunk: %+v", seen)
	}
	r := gw.WaitUsage("sally", 1)[0]
	if r.Estimated || r.PromptTokens != 1200 || r.CompletionTokens != 300 || r.Cost != 1200+2*300 {
		t.Fatalf("row %+v; want the upstream's 1200 + 300 tokens, costing %d", r, 1200+2*300)
	}
	if _, used := gw.Quota("sally"); used != r.Cost {
		t.Fatalf("used %d, row cost %d", used, r.Cost)
	}
}

// TestClientGoneOpenAIStreamBillsFinalUsage: a client that leaves after a
// few chunks of an OpenAI stream is billed the usage the upstream sends in
// its last chunk, which the gateway reads on for; the upstream is not cut.
func TestClientGoneOpenAIStreamBillsFinalUsage(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	up.Set(func(b *gatewaytest.Behavior) {
		b.Reply = strings.Repeat("word ", 40)
		b.PromptTokens, b.CompletionTokens = 1200, 300
		b.ChunkDelay = 10 * time.Millisecond
	})
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("otis", 1_000_000_000)
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := c.Chat.Completions.NewStreaming(ctx, chatParams("gpt-x", "talk"))
	for n := 0; stream.Next(); {
		if n++; n == 5 {
			cancel()
		}
	}
	r := gw.WaitUsage("otis", 1)[0]
	if r.Estimated || r.PromptTokens != 1200 || r.CompletionTokens != 300 || r.Cost != 1200+2*300 {
		t.Fatalf("row %+v; want the upstream's final 1200 + 300 tokens, costing %d", r, 1200+2*300)
	}
	if up.Cancelled() != 0 {
		t.Fatalf("the upstream was hung up on %d times before its end", up.Cancelled())
	}
	if _, used := gw.Quota("otis"); used != r.Cost {
		t.Fatalf("used %d, row cost %d", used, r.Cost)
	}
}

// TestClientGoneAnthropicStreamBillsFinalUsage: Anthropic says the output
// count in message_delta, at the end; a client that leaves earlier is
// billed it, not message_start's count plus an estimate.
func TestClientGoneAnthropicStreamBillsFinalUsage(t *testing.T) {
	up := gatewaytest.NewFakeAnthropic(t, "sk-up")
	up.Set(func(b *gatewaytest.Behavior) {
		b.Reply = strings.Repeat("word ", 40)
		b.PromptTokens, b.CompletionTokens = 1200, 300
		b.ChunkDelay = 10 * time.Millisecond
	})
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("ada", 1_000_000_000)
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 1000,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("talk"))}})
	for n := 0; stream.Next(); {
		if stream.Current().Type == "content_block_delta" {
			if n++; n == 3 {
				cancel()
			}
		}
	}
	r := gw.WaitUsage("ada", 1)[0]
	if r.Estimated || r.PromptTokens != 1200 || r.CompletionTokens != 300 || r.Cost != 1200+2*300 {
		t.Fatalf("row %+v; want the upstream's final 1200 + 300 tokens, costing %d", r, 1200+2*300)
	}
	if _, used := gw.Quota("ada"); used != r.Cost {
		t.Fatalf("used %d, row cost %d", used, r.Cost)
	}
}

// hiddenThinker answers a Gemini stream as Gemini 2.5 does with its
// thinking hidden (the default): after the thinking, chunks of visible
// text whose usageMetadata counts the thoughts too (1,263 tokens); then it
// stays silent, never ending, until the gateway hangs up (gone closes).
func hiddenThinker(t *testing.T) (srv *httptest.Server, gone <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, text := range []string{"The sky is blue", " because of Rayleigh scattering."} {
			fmt.Fprintf(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": %q}], \"role\": \"model\"}, \"index\": 0}], "+
				"\"usageMetadata\": {\"promptTokenCount\": 500, \"candidatesTokenCount\": %d, \"totalTokenCount\": %d, \"thoughtsTokenCount\": 1263}, "+
				"\"modelVersion\": \"gemini-x\", \"responseId\": \"r-think\"}\r\n\r\n", text, 4*(i+1), 500+4*(i+1)+1263)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		once.Do(func() { close(ch) })
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// TestClientGoneAfterGeminiThinkingBillsThoughts: a client that hangs up
// after Gemini's hidden thinking is billed the thoughts the upstream
// counted, not the visible text alone; the upstream never ends, so the
// drain stops at stream_drain_timeout and bills what was reported.
func TestClientGoneAfterGeminiThinkingBillsThoughts(t *testing.T) {
	up, gone := hiddenThinker(t)
	gw := gatewaytest.Start(t, reservationConfig().option("stream_drain_timeout 200ms").String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("gil", 1_000_000_000)
	// the second chunk's usage: 500 prompt tokens, 8 of text, 1,263 of thoughts
	const want = 500 + 2*(8+1263)

	t.Run("gemini client", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL}})
		if err != nil {
			t.Fatal(err)
		}
		for resp, err := range gc.Models.GenerateContentStream(ctx, "gemini-x", genai.Text("Why is the sky blue?"), nil) {
			if err != nil || resp.Text() == "" {
				t.Fatalf("first chunk: %v %v", resp, err)
			}
			cancel()
			break
		}
	})
	t.Run("openai client", func(t *testing.T) {
		<-gone // one at a time: the first stream's drain has ended
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		stream := c.Chat.Completions.NewStreaming(ctx, chatParams("gemini-x", "Why is the sky blue?"))
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				cancel()
			}
		}
	})
	rows := gw.WaitUsage("gil", 2)
	for i, r := range rows {
		if r.Status != 499 || r.Estimated || r.PromptTokens != 500 || r.CompletionTokens != 8+1263 || r.ReasoningTokens != 1263 || r.Cost != want {
			t.Errorf("row %d %+v; want the reported 500 + 1,271 tokens (1,263 of thoughts), costing %d", i, r, want)
		}
	}
	if _, used := gw.Quota("gil"); used != rows[0].Cost+rows[1].Cost {
		t.Fatalf("used %d, rows cost %d + %d", used, rows[0].Cost, rows[1].Cost)
	}
}

// endless is an OpenAI upstream whose stream never ends: a chunk every
// pace, until the gateway hangs up (gone closes then).
func endless(t *testing.T, pace time.Duration) (srv *httptest.Server, gone <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(ch) })
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
		for {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(pace):
			}
			if _, err := fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"more \"},\"finish_reason\":null}]}\n\n"); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// TestDrainStopsAtItsBounds: an upstream that goes on forever after its
// client left is read no longer than stream_drain_timeout, and no further
// than stream_drain_max_bytes; the request is billed on what was read.
func TestDrainStopsAtItsBounds(t *testing.T) {
	for _, c := range []struct {
		name, timeout, bytes string
		pace                 time.Duration
	}{
		// at 20 chunks a second the byte bound is far: time ends it
		{"time", "stream_drain_timeout 300ms", "", 50 * time.Millisecond},
		// a time bound longer than the test waits: bytes end it
		{"bytes", "stream_drain_timeout 1h", "stream_drain_max_bytes 16KB", time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			up, gone := endless(t, c.pace)
			gw := gatewaytest.Start(t, reservationConfig().option(c.timeout).option(c.bytes).String(), gatewaytest.Vars{"UP": up.URL})
			key := gw.AddUser("ed", 1_000_000_000)
			cl := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stream := cl.Chat.Completions.NewStreaming(ctx, chatParams("gpt-x", "go on"))
			for n := 0; stream.Next(); {
				if n++; n == 3 {
					cancel()
				}
			}
			select {
			case <-gone:
			case <-time.After(time.Minute):
				t.Fatal("the gateway still reads an endless stream a minute after its client left")
			}
			r := gw.WaitUsage("ed", 1)[0]
			if r.Status != 499 || !r.Estimated || r.CompletionTokens < 2 || r.Cost != r.PromptTokens+2*r.CompletionTokens {
				t.Fatalf("row %+v; want a 499 billed on the text read", r)
			}
			if _, used := gw.Quota("ed"); used != r.Cost {
				t.Fatalf("used %d, row cost %d", used, r.Cost)
			}
		})
	}
}

// slowThinker answers a Gemini stream after thinking: nothing but its
// headers until release closes, then the visible text and the final
// usage (1,263 tokens of hidden thoughts) and the end. arrived closes when
// the request is in.
func slowThinker(t *testing.T) (srv *httptest.Server, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}), make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"The sky is blue\"}], \"role\": \"model\"}, \"index\": 0}], "+
			"\"usageMetadata\": {\"promptTokenCount\": 500, \"candidatesTokenCount\": 4, \"totalTokenCount\": 1767, \"thoughtsTokenCount\": 1263}, \"modelVersion\": \"gemini-x\", \"responseId\": \"r-slow\"}\r\n\r\n")
		fmt.Fprint(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \".\"}], \"role\": \"model\"}, \"finishReason\": \"STOP\", \"index\": 0}], "+
			"\"usageMetadata\": {\"promptTokenCount\": 500, \"candidatesTokenCount\": 5, \"totalTokenCount\": 1768, \"thoughtsTokenCount\": 1263}, \"modelVersion\": \"gemini-x\", \"responseId\": \"r-slow\"}\r\n\r\n")
	}))
	t.Cleanup(srv.Close)
	return srv, arrived, release
}

// TestClientGoneWhileGeminiThinksBillsItsAnswer: a client that gives up
// while Gemini thinks, before its first chunk, is billed the answer the
// upstream then finishes and reports, thoughts included (formerly the
// upstream was hung up on and the request cost nothing).
func TestClientGoneWhileGeminiThinksBillsItsAnswer(t *testing.T) {
	up, arrived, release := slowThinker(t)
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("tim", 1_000_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
			strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"Why is the sky blue?"}]}]}`))
		req.Header.Set("X-Goog-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the client got an answer it gave up on")
	}
	close(release)
	r := gw.WaitUsage("tim", 1)[0]
	if r.Estimated || r.PromptTokens != 500 || r.CompletionTokens != 5+1263 || r.ReasoningTokens != 1263 || r.Cost != 500+2*(5+1263) {
		t.Fatalf("row %+v; want the reported 500 + 1,268 tokens (1,263 of thoughts), costing %d", r, 500+2*(5+1263))
	}
	if _, used := gw.Quota("tim"); used != r.Cost {
		t.Fatalf("used %d, row cost %d", used, r.Cost)
	}
}
