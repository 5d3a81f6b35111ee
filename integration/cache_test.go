package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The exact response cache (docs/cache.md): a deterministic request asked
// again, keys reordered and respaced, is answered from the cache in the
// caller's dialect, streamed event by event as the miss was, billed its
// configured share and marked on its usage row; another user misses; a
// sampled request, a refused one and an oversized answer are not kept;
// max_bytes evicts; force caches what is not deterministic.

// responseCacheConfig prices coder-1 so the fakes' 10 prompt and 20 completion
// tokens cost 10 + 200 = 210 units.
func responseCacheConfig(cacheLines ...string) *caddyfile {
	return gatewayConfig().
		option(block("cache", cacheLines...)).
		channel("up", "openai", "{{UP}}", "sk-up", "coder-1").
		channel("claude", "anthropic", "{{ANT}}", "sk-ant-up", "claude-1").
		price("coder-1", "input 1", "output 10").
		price("claude-1", "input 1", "output 10")
}

// reordered rewrites a JSON request body with every object's keys in
// reverse order and spaced out: the same request, other bytes.
func reordered() option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		var out bytes.Buffer
		writeReversed(&out, v)
		r.Body = io.NopCloser(bytes.NewReader(out.Bytes()))
		r.ContentLength = int64(out.Len())
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out.Bytes())), nil }
		return next(r)
	})
}

func writeReversed(w *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		w.WriteString("{\n  ")
		for i, k := range keys {
			if i > 0 {
				w.WriteString(" ,\n  ")
			}
			kb, _ := json.Marshal(k)
			w.Write(kb)
			w.WriteString(" : ")
			writeReversed(w, v[k])
		}
		w.WriteString("\n}")
	case []any:
		w.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				w.WriteString(", ")
			}
			writeReversed(w, e)
		}
		w.WriteString(" ]")
	default:
		b, _ := json.Marshal(v)
		w.Write(b)
	}
}

func cacheHeader(into *string) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if resp != nil {
			*into = resp.Header.Get("X-Gateway-Cache")
		}
		return resp, err
	})
}

func TestResponseCache(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	ant := gatewaytest.NewFakeAnthropic(t, "sk-ant-up")
	gw := gatewaytest.Start(t, responseCacheConfig("enable", "ttl 1h", "max_entry_bytes 8KiB", "bill 25%").String(),
		gatewaytest.Vars{"UP": up.URL, "ANT": ant.BaseURL()})
	alice := gw.AddUser("alice", 1_000_000)
	bob := gw.AddUser("bob", 1_000_000)
	ctx := context.Background()
	client := func(key string, opts ...option.RequestOption) openai.Client {
		return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(gw.URL + "/v1"), option.WithAPIKey(key), option.WithMaxRetries(0)}, opts...)...)
	}
	params := openai.ChatCompletionNewParams{Model: "coder-1", Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be exact."), openai.UserMessage("What is 2+2?")}}
	upstream := func() int { return len(up.Requests()) }

	// a miss, then the same request with its keys reordered: a hit that
	// never reaches the upstream, whose reply has changed meanwhile
	var header string
	c := client(alice, cacheHeader(&header))
	miss, err := c.Chat.Completions.New(ctx, params)
	if err != nil || header != "miss" || upstream() != 1 {
		t.Fatalf("first request: header %q, %d upstream requests, %v", header, upstream(), err)
	}
	up.Set(func(b *gatewaytest.Behavior) { b.Reply = "something else" })
	hit, err := c.Chat.Completions.New(ctx, params, reordered())
	if err != nil || header != "hit" || upstream() != 1 {
		t.Fatalf("reordered request: header %q, %d upstream requests, %v", header, upstream(), err)
	}
	if hit.RawJSON() != miss.RawJSON() || hit.Choices[0].Message.Content != "Hello from the fake upstream" {
		t.Fatalf("the hit answered %s; the miss %s", hit.RawJSON(), miss.RawJSON())
	}
	rows := gw.WaitUsage("alice", 2)
	if rows[0].CacheHit || rows[0].Cost != 210 {
		t.Fatalf("the miss's row: hit %v cost %d; want a miss at 210", rows[0].CacheHit, rows[0].Cost)
	}
	// 25% of 210 is 52.5, rounded up
	if h := rows[1]; !h.CacheHit || h.Cost != 53 || h.CacheSaved != 157 || h.PromptTokens != 10 || h.CompletionTokens != 20 || h.Status != 200 {
		t.Fatalf("the hit's row: %+v; want a hit charged 53 that saved 157", h)
	}
	if q, _ := gw.Quota("alice"); q != 1_000_000-210-53 {
		t.Fatalf("alice's balance %d; want charged 263", q)
	}

	// another user asking the same misses
	cb := client(bob, cacheHeader(&header))
	if _, err := cb.Chat.Completions.New(ctx, params); err != nil || header != "miss" || upstream() != 2 {
		t.Fatalf("bob: header %q, %d upstream requests, %v", header, upstream(), err)
	}
	if _, err := cb.Chat.Completions.New(ctx, params); err != nil || header != "hit" || upstream() != 2 {
		t.Fatalf("bob again: header %q, %d upstream requests, %v", header, upstream(), err)
	}

	// the caller refuses the cache, or keeps the answer out of it
	for _, h := range [][2]string{{"X-Gateway-Cache", "refuse"}, {"Cache-Control", "no-store"}} {
		n := upstream()
		if _, err := c.Chat.Completions.New(ctx, params, option.WithHeader(h[0], h[1])); err != nil || header != "" || upstream() != n+1 {
			t.Fatalf("%s: %s: header %q, %d upstream requests, %v", h[0], h[1], header, upstream()-n, err)
		}
	}

	// a sampled request is not deterministic: never cached
	sampled := params
	sampled.Temperature = openai.Float(0.7)
	for range 2 {
		n := upstream()
		if _, err := c.Chat.Completions.New(ctx, sampled); err != nil || header != "" || upstream() != n+1 {
			t.Fatalf("sampled request: header %q, %d upstream requests, %v", header, upstream()-n, err)
		}
	}

	// a stream: the hit replays the miss's events, one for one
	seeded := openai.ChatCompletionNewParams{Model: "coder-1", Seed: openai.Int(7),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to five.")}}
	streamed := func(opts ...option.RequestOption) []string {
		t.Helper()
		st := c.Chat.Completions.NewStreaming(ctx, seeded, opts...)
		var events []string
		for st.Next() {
			events = append(events, st.Current().RawJSON())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return events
	}
	n := upstream()
	first := streamed()
	if header != "miss" || upstream() != n+1 || len(first) < 3 {
		t.Fatalf("stream miss: header %q, %d upstream requests, %d events", header, upstream()-n, len(first))
	}
	up.Set(func(b *gatewaytest.Behavior) { b.Reply = "yet another reply" })
	again := streamed(reordered())
	if header != "hit" || upstream() != n+1 {
		t.Fatalf("stream hit: header %q, %d upstream requests", header, upstream()-n)
	}
	if !slices.Equal(first, again) {
		t.Fatalf("the replayed events differ:\n%s\nwant\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}
	rows = gw.WaitUsage("alice", 8)
	if last := rows[len(rows)-1]; !last.CacheHit || !last.Stream || last.Cost != 53 {
		t.Fatalf("the stream hit's row: %+v", last)
	}

	// a stream that broke off, or that its client left, is not kept: the
	// same request asked again goes upstream
	broken := openai.ChatCompletionNewParams{Model: "coder-1", Seed: openai.Int(8),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to six.")}}
	up.Set(func(b *gatewaytest.Behavior) { b.BreakAfter = 2 })
	st := c.Chat.Completions.NewStreaming(ctx, broken)
	for st.Next() {
	}
	if st.Err() == nil || header != "miss" {
		t.Fatalf("a broken stream: header %q, error %v", header, st.Err())
	}
	// slow enough that the client leaves before the stream ends
	up.Set(func(b *gatewaytest.Behavior) { b.BreakAfter, b.ChunkDelay = 0, 50*time.Millisecond })
	left, leave := context.WithCancel(ctx)
	st = c.Chat.Completions.NewStreaming(left, broken)
	if !st.Next() {
		t.Fatalf("the stream to leave: %v", st.Err())
	}
	leave()
	for st.Next() {
	}
	st.Close()
	// the row of the stream the client left is written before the next
	// request can look its answer up
	gw.WaitUsage("alice", 10)
	up.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 0 })
	n = upstream()
	st = c.Chat.Completions.NewStreaming(ctx, broken)
	for st.Next() {
	}
	if st.Err() != nil || header != "miss" || upstream() != n+1 {
		t.Fatalf("after a broken and a left stream: header %q, %d upstream requests, %v", header, upstream()-n, st.Err())
	}

	// Anthropic's Messages stream, in its own dialect
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(alice), aoption.WithMaxRetries(0),
		aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				header = resp.Header.Get("X-Gateway-Cache")
			}
			return resp, err
		}))
	mp := anthropic.MessageNewParams{Model: "claude-1", MaxTokens: 100, Temperature: anthropic.Float(0),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
	messages := func() []string {
		t.Helper()
		st := ac.Messages.NewStreaming(ctx, mp)
		var events []string
		for st.Next() {
			events = append(events, st.Current().RawJSON())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return events
	}
	am := messages()
	if header != "miss" || len(ant.Requests()) != 1 || len(am) < 4 {
		t.Fatalf("messages miss: header %q, %d upstream requests, %d events", header, len(ant.Requests()), len(am))
	}
	ant.Set(func(b *gatewaytest.Behavior) { b.Reply = "changed" })
	ah := messages()
	if header != "hit" || len(ant.Requests()) != 1 {
		t.Fatalf("messages hit: header %q, %d upstream requests", header, len(ant.Requests()))
	}
	if !slices.Equal(am, ah) {
		t.Fatalf("the replayed Messages events differ:\n%s\nwant\n%s", strings.Join(ah, "\n"), strings.Join(am, "\n"))
	}

	// Gemini's stream, from the genai SDK, on the Anthropic channel
	var gheader string
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: alice, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL},
		HTTPClient: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if resp != nil {
				gheader = resp.Header.Get("X-Gateway-Cache")
			}
			return resp, err
		})}})
	if err != nil {
		t.Fatal(err)
	}
	gemini := func() []string {
		t.Helper()
		var events []string
		for resp, err := range gc.Models.GenerateContentStream(ctx, "claude-1", genai.Text("Say hi."), &genai.GenerateContentConfig{Temperature: genai.Ptr[float32](0)}) {
			if err != nil {
				t.Fatal(err)
			}
			resp.SDKHTTPResponse = nil // the answer's headers: a hit's differ
			b, _ := json.Marshal(resp)
			events = append(events, string(b))
		}
		return events
	}
	n = len(ant.Requests())
	gm := gemini()
	if gheader != "miss" || len(ant.Requests()) != n+1 || len(gm) < 2 {
		t.Fatalf("gemini miss: header %q, %d upstream requests, %d events", gheader, len(ant.Requests())-n, len(gm))
	}
	ant.Set(func(b *gatewaytest.Behavior) { b.Reply = "changed again" })
	gh := gemini()
	if gheader != "hit" || len(ant.Requests()) != n+1 || !slices.Equal(gm, gh) {
		t.Fatalf("gemini hit: header %q, %d upstream requests; events\n%s\nwant\n%s", gheader, len(ant.Requests())-n, strings.Join(gh, "\n"), strings.Join(gm, "\n"))
	}

	// the metrics: five hits (alice's, bob's, the three streams'), each
	// saving 210 - 53 units; eight misses (the refused and sampled
	// requests did not use the cache). A request is counted as it settles,
	// before its usage row is queued: once all fifteen of alice's rows
	// are in, every request is counted.
	gw.WaitUsage("alice", 15)
	m := gw.Metrics()
	hits, misses := m[`gateway_response_cache_requests_total{result="hit"}`], m[`gateway_response_cache_requests_total{result="miss"}`]
	if hits != 5 || misses != 8 || m["gateway_response_cache_saved_units_total"] != 5*157 || m["gateway_response_cache_entries"] != 6 {
		t.Fatalf("metrics: %v hits, %v misses, %v saved, %v entries, %v bytes", hits, misses, m["gateway_response_cache_saved_units_total"],
			m["gateway_response_cache_entries"], m["gateway_response_cache_bytes"])
	}
}

// TestResponseCacheBounds: max_bytes evicts the least recently used
// answer, an answer over max_entry_bytes is not kept, and force caches a
// request that is not deterministic; a reload keeps the entries, and in
// mode request only a request that asks with X-Gateway-Cache: use gets one.
func TestResponseCacheBounds(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	ant := gatewaytest.NewFakeAnthropic(t, "sk-ant-up")
	// one answer (about 700 bytes with its overhead) fits, two do not
	gw := gatewaytest.Start(t, responseCacheConfig("enable", "force", "max_bytes 1200B", "max_entry_bytes 1200B").String(),
		gatewaytest.Vars{"UP": up.URL, "ANT": ant.BaseURL()})
	key := gw.AddUser("carol", 1_000_000)
	var header string
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0), cacheHeader(&header))
	ctx := context.Background()
	ask := func(prompt, want string) {
		t.Helper()
		n := len(up.Requests())
		// no temperature, no seed: cached only because of force
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "coder-1",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		got := map[bool]string{true: "miss", false: "hit"}[len(up.Requests()) > n]
		if err != nil || header != want || got != want {
			t.Fatalf("%s: header %q, upstream says %s, %v; want %s", prompt, header, got, err, want)
		}
	}
	ask("one", "miss")
	ask("one", "hit")
	ask("two", "miss") // evicts one
	ask("two", "hit")
	ask("one", "miss")
	// an answer larger than max_entry_bytes is served, not kept
	up.Set(func(b *gatewaytest.Behavior) { b.Reply = strings.Repeat("long words ", 150) })
	ask("three", "miss")
	ask("three", "miss")
	rows := gw.WaitUsage("carol", 7)
	hits := 0
	for _, r := range rows {
		if r.CacheHit {
			hits++
		}
	}
	if hits != 2 {
		t.Fatalf("%d rows marked as hits; want 2", hits)
	}

	// reloaded into mode request for this key: the entries are kept, and
	// used only by a request that asks for them
	gw.Reload(responseCacheConfig("enable", "force", "max_bytes 1200B", "max_entry_bytes 1200B", "mode request", "keys default").String(),
		gatewaytest.Vars{"UP": up.URL, "ANT": ant.BaseURL()})
	up.Set(func(b *gatewaytest.Behavior) { b.Reply = "after the reload" })
	n := len(up.Requests())
	one := openai.ChatCompletionNewParams{Model: "coder-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one")}}
	// the first request after a reload retries as the SDK does by default:
	// a connection the old server accepted as it stopped is closed under
	// its write (a run at load 2: "use of closed network connection"),
	// which is Caddy's reload, not the cache; such a failure never reached
	// the upstream, whose count stays exact
	if _, err := c.Chat.Completions.New(ctx, one, option.WithMaxRetries(2)); err != nil || header != "" || len(up.Requests()) != n+1 {
		t.Fatalf("not asked for: header %q, %d upstream requests, %v", header, len(up.Requests())-n, err)
	}
	got, err := c.Chat.Completions.New(ctx, one, option.WithHeader("X-Gateway-Cache", "use"))
	if err != nil || header != "hit" || len(up.Requests()) != n+1 || got.Choices[0].Message.Content != "Hello from the fake upstream" {
		t.Fatalf("asked for after the reload: header %q, %d upstream requests, %v", header, len(up.Requests())-n, err)
	}
}

// TestResponseCacheInstances: with store database, an answer one instance
// kept is served by another; another user still misses there.
func TestResponseCacheInstances(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	ant := gatewaytest.NewFakeAnthropic(t, "sk-ant-up")
	gws := gatewaytest.StartInstances(t, 2, responseCacheConfig("enable", "store database", "max_bytes 1MiB").String(),
		gatewaytest.Vars{"UP": up.URL, "ANT": ant.BaseURL()})
	dee := gws[0].AddUser("dee", 1_000_000)
	eve := gws[0].AddUser("eve", 1_000_000)
	body := []byte(`{"model":"coder-1","temperature":0,"messages":[{"role":"user","content":"Shared?"}]}`)
	resp, miss := gws[0].Do(http.MethodPost, "/v1/chat/completions", dee, body, nil)
	if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Cache") != "miss" {
		t.Fatalf("instance 0: %d %q %s", resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), miss)
	}
	// the upstream fails from now on: an answer from instance 1 is the
	// one instance 0 kept (written after its request: awaited)
	up.Set(func(b *gatewaytest.Behavior) { b.FailStatus = http.StatusInternalServerError })
	eventually(t, "instance 1 serves instance 0's answer", func() bool {
		resp, b := gws[1].Do(http.MethodPost, "/v1/chat/completions", dee, body, nil)
		if resp.StatusCode == 200 && string(b) != string(miss) {
			t.Fatalf("instance 1 answered %s; instance 0 kept %s", b, miss)
		}
		return resp.StatusCode == 200 && resp.Header.Get("X-Gateway-Cache") == "hit"
	})
	resp, b := gws[1].Do(http.MethodPost, "/v1/chat/completions", eve, body, nil)
	if resp.StatusCode == 200 || resp.Header.Get("X-Gateway-Cache") != "miss" {
		t.Fatalf("another user on instance 1: %d %q %s", resp.StatusCode, resp.Header.Get("X-Gateway-Cache"), b)
	}
}

// roundTrip is a function as an http.RoundTripper.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
