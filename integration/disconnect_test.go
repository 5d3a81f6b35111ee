package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// thinker streams a reasoning answer, a word an event, and never ends it:
// it waits for the gateway to hang up. The Anthropic form reports usage
// at message_start (prompt 500 tokens, 1 output token so far), as
// Anthropic does; the OpenAI form reports none before the end; the Gemini
// form repeats a partial usageMetadata on every thought chunk (the prompt
// count, no output yet), as Gemini does while it thinks.
func thinker(t *testing.T, words []string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(event, data string) {
			if event != "" {
				fmt.Fprintf(w, "event: %s\n", event)
			}
			fmt.Fprintf(w, "data: %s\n\n", data)
			fl.Flush()
		}
		if strings.HasPrefix(r.URL.Path, "/v1/messages") {
			send("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":500,"output_tokens":1}}}`)
			send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`)
			for _, wd := range words {
				send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`+wd+` "}}`)
			}
		} else if strings.Contains(r.URL.Path, ":streamGenerateContent") {
			for _, wd := range words {
				send("", `{"candidates":[{"content":{"parts":[{"text":"`+wd+` ","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-x","responseId":"r1"}`)
			}
		} else {
			send("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
			for _, wd := range words {
				send("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"`+wd+` "},"finish_reason":null}]}`)
			}
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// readThenLeave reads n lines of a stream, then hangs up.
func readThenLeave(t *testing.T, gw *gatewaytest.Gateway, path, key, body string, header http.Header, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < n && sc.Scan(); i++ {
	}
	cancel()
	resp.Body.Close()
}

// TestDisconnectBeforeUsageBillsReasoning: a client that leaves a
// reasoning stream before its usage chunk is billed at least the usage
// the upstream reported when it came, else the local count of everything
// generated, reasoning included.
func TestDisconnectBeforeUsageBillsReasoning(t *testing.T) {
	words := strings.Fields(strings.Repeat("let me think about this carefully ", 8))
	up := thinker(t, words)
	// thinker never ends: the drain after the client left stops at its bound
	gw := gatewaytest.Start(t, reservationConfig().option("stream_drain_timeout 200ms").String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("dora", 1_000_000_000)
	reasoning := tokenizer.Count("gpt-x", strings.Join(words, " ")+" ")

	// OpenAI: no usage came; the local count of the reasoning is billed
	readThenLeave(t, gw, "/v1/chat/completions", key,
		`{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"think"}]}`, nil, 2*(len(words)+1))
	r := gw.WaitUsage("dora", 1)[0]
	if !r.Estimated || r.CompletionTokens < reasoning || r.PromptTokens == 0 || r.Cost < r.PromptTokens+2*r.CompletionTokens {
		t.Fatalf("no usage came: row %+v; want at least %d completion tokens of reasoning", r, reasoning)
	}

	// Anthropic: message_start said 500 prompt tokens and 1 output token;
	// the thinking after it counts too
	readThenLeave(t, gw, "/v1/messages", key,
		`{"model":"claude-x","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":"think"}]}`,
		http.Header{"Anthropic-Version": {"2023-06-01"}}, 3*(len(words)+2))
	r = gw.WaitUsage("dora", 2)[1]
	if r.PromptTokens < 500 || r.CompletionTokens < reasoning || r.Cost < 500+2*int64(reasoning) {
		t.Fatalf("usage came at the start: row %+v; want at least 500 prompt and %d completion tokens", r, reasoning)
	}
	_, used := gw.Quota("dora")
	rows := gw.WaitUsage("dora", 2)
	if used != rows[0].Cost+rows[1].Cost {
		t.Fatalf("used %d, rows cost %d + %d", used, rows[0].Cost, rows[1].Cost)
	}
}

// TestDisconnectMidThinkingBillsThoughts: Gemini repeats a partial
// usageMetadata on every chunk while it thinks (the prompt's 9 tokens, no
// output yet); a client that hangs up then is billed the thoughts it was
// sent, counted locally, not the partial usage alone.
func TestDisconnectMidThinkingBillsThoughts(t *testing.T) {
	words := strings.Fields(strings.Repeat("let me think about this carefully ", 50))
	up := thinker(t, words)
	// thinker never ends: the drain after the client left stops at its bound
	gw := gatewaytest.Start(t, reservationConfig().option("stream_drain_timeout 200ms").String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("gert", 1_000_000_000)
	// every thought but the last is surely relayed before the hang-up
	thoughts := int64(tokenizer.Count("gemini-x", strings.Join(words[:len(words)-1], " ")+" "))

	for i, c := range []struct {
		name, path, body string
	}{
		{"gemini client", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"think"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`},
		{"openai client", "/v1/chat/completions",
			`{"model":"gemini-x","stream":true,"messages":[{"role":"user","content":"think"}]}`},
	} {
		// two lines an event: the openai client's first is its role chunk
		readThenLeave(t, gw, c.path, key, c.body, http.Header{"X-Goog-Api-Key": {key}}, 2*len(words))
		r := gw.WaitUsage("gert", i+1)[i]
		// 1 unit a prompt token, 2 an output token
		if !r.Estimated || r.PromptTokens < 9 || r.CompletionTokens < thoughts || r.Cost < r.PromptTokens+2*thoughts {
			t.Errorf("%s: row %+v; want at least 9 prompt tokens and %d of thoughts, costing at least %d", c.name, r, thoughts, 9+2*thoughts)
		}
	}
	_, used := gw.Quota("gert")
	rows := gw.WaitUsage("gert", 2)
	if used != rows[0].Cost+rows[1].Cost {
		t.Errorf("used %d, rows cost %d + %d", used, rows[0].Cost, rows[1].Cost)
	}
}
