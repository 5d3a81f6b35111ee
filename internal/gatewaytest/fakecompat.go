package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// FakeCompat is an OpenAI-compatible vendor whose wire differs from
// OpenAI's in the ways its public API reference documents:
//
//   - deepseek (api-docs.deepseek.com): POST /chat/completions at the host
//     (or under /v1); reasoning_content; usage with prompt_cache_hit_tokens
//     and prompt_cache_miss_tokens; a stream opened by ": keep-alive" and
//     its usage, when asked, in a last chunk with no choices;
//   - zhipu (docs.bigmodel.cn): POST /api/paas/v4/chat/completions, no
//     /v1; reasoning_content; prompt_tokens_details.cached_tokens; chunks
//     without "object", usage in the chunk with the finish reason; errors
//     {"error":{"code":"1113","message":...}};
//   - moonshot (platform.moonshot.ai): POST /v1/chat/completions;
//     cached_tokens at the top of usage; a stream's usage inside its last
//     chunk's choice;
//   - openrouter (openrouter.ai/docs): POST /api/v1/chat/completions;
//     reasoning (not reasoning_content); usage with cost; ": OPENROUTER
//     PROCESSING" comments; after FailMidStream, a stream that breaks off
//     with a chunk carrying an error and finish_reason "error".
//
// It answers every chat with Reasoning then Reply, and the counts the test
// set; a wrong key gets a 401 in the vendor's shape, another path a 404.
type FakeCompat struct {
	*httptest.Server
	Vendor string
	Key    string

	mu       sync.Mutex
	requests []CompatRequest
	answer   CompatAnswer
	fail     *compatFailure
	midFail  bool
}

// FailMidStream has later streams break off after their first words with
// the vendor's in-stream error chunk (OpenRouter's).
func (f *FakeCompat) FailMidStream() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.midFail = true
}

// CompatAnswer is what a FakeCompat's model says and reports.
type CompatAnswer struct {
	Reasoning, Reply                         string
	Prompt, Cached, Completion, ReasoningTok int64
}

// CompatRequest is a request a FakeCompat received.
type CompatRequest struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

type compatFailure struct {
	status int
	body   string
}

// NewFakeCompat starts a fake of vendor (deepseek, zhipu, moonshot) that
// expects key as a Bearer token.
func NewFakeCompat(t testing.TB, vendor, key string) *FakeCompat {
	Secret(key)
	f := &FakeCompat{Vendor: vendor, Key: key, answer: CompatAnswer{Reasoning: "Thinking it over.", Reply: "Hello from the fake vendor", Prompt: 10, Completion: 20}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	return f
}

// BaseURL is the address a channel's base_url names: the vendor's host.
func (f *FakeCompat) BaseURL() string { return f.Server.URL }

// Answer sets what the model says and reports.
func (f *FakeCompat) Answer(a CompatAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = a
}

// Fail has every later request answered with status and the vendor's
// error body; status 0 ends the failure.
func (f *FakeCompat) Fail(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = nil
	if status != 0 {
		f.fail = &compatFailure{status, body}
	}
}

// Requests are the requests received, oldest first.
func (f *FakeCompat) Requests() []CompatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]CompatRequest(nil), f.requests...)
}

func (f *FakeCompat) chatPath(p string) bool {
	switch f.Vendor {
	case "deepseek":
		return p == "/chat/completions" || p == "/v1/chat/completions"
	case "zhipu":
		return p == "/api/paas/v4/chat/completions"
	case "openrouter":
		return p == "/api/v1/chat/completions"
	}
	return p == "/v1/chat/completions"
}

func (f *FakeCompat) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.requests = append(f.requests, CompatRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	a, fail, midFail := f.answer, f.fail, f.midFail
	f.mu.Unlock()

	switch {
	case r.Header.Get("Authorization") != "Bearer "+f.Key:
		f.error(w, http.StatusUnauthorized, "1001", "authentication_error", "Authentication Fails (no such user)")
		return
	case r.Method != http.MethodPost || !f.chatPath(r.URL.Path):
		f.error(w, http.StatusNotFound, "1222", "not_found_error", "Not Found")
		return
	case fail != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fail.status)
		io.WriteString(w, fail.body)
		return
	case body == nil:
		f.error(w, http.StatusBadRequest, "1210", "invalid_request_error", "Failed to deserialize the JSON body into the target type")
		return
	}
	model, _ := body["model"].(string)
	if stream, _ := body["stream"].(bool); stream {
		opts, _ := body["stream_options"].(map[string]any)
		include, _ := opts["include_usage"].(bool)
		f.stream(w, model, a, include, midFail)
		return
	}
	msg := map[string]any{"role": "assistant", "content": a.Reply, f.reasoningWord(): a.Reasoning}
	out := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1718345013, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop", "logprobs": nil}},
		"usage":   f.usage(a),
	}
	if f.Vendor == "zhipu" {
		delete(out, "object")
		out["request_id"] = "20250910153012a8c5f2d1e3b4c5d6e7"
	}
	writeJSON(w, out)
}

// usage is the vendor's usage object.
func (f *FakeCompat) usage(a CompatAnswer) map[string]any {
	u := map[string]any{"prompt_tokens": a.Prompt, "completion_tokens": a.Completion, "total_tokens": a.Prompt + a.Completion}
	switch f.Vendor {
	case "deepseek":
		u["prompt_cache_hit_tokens"], u["prompt_cache_miss_tokens"] = a.Cached, a.Prompt-a.Cached
		u["completion_tokens_details"] = map[string]any{"reasoning_tokens": a.ReasoningTok}
	case "zhipu":
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": a.Cached}
	case "moonshot":
		u["cached_tokens"] = a.Cached
	case "openrouter":
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": a.Cached}
		u["cost"], u["is_byok"] = 0.000153, false
	}
	return u
}

// reasoningWord is the member the vendor sends its reasoning in.
func (f *FakeCompat) reasoningWord() string {
	if f.Vendor == "openrouter" {
		return "reasoning"
	}
	return "reasoning_content"
}

func (f *FakeCompat) error(w http.ResponseWriter, status int, code, typ, msg string) {
	e := map[string]any{"message": msg, "type": typ}
	if f.Vendor == "zhipu" {
		e = map[string]any{"code": code, "message": msg}
	}
	writeJSONStatus(w, status, map[string]any{"error": e})
}

func (f *FakeCompat) stream(w http.ResponseWriter, model string, a CompatAnswer, includeUsage, midFail bool) {
	startSSE(w)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1718345013, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if f.Vendor == "zhipu" {
			delete(c, "object")
		}
		return c
	}
	switch f.Vendor {
	case "deepseek":
		io.WriteString(w, ": keep-alive\n\n")
	case "openrouter":
		io.WriteString(w, ": OPENROUTER PROCESSING\n\n")
	}
	rw := f.reasoningWord()
	send(chunk(map[string]any{"role": "assistant", "content": nil, rw: ""}, nil))
	for _, word := range strings.SplitAfter(a.Reasoning, " ") {
		send(chunk(map[string]any{"content": nil, rw: word}, nil))
	}
	for i, word := range strings.SplitAfter(a.Reply, " ") {
		if midFail && i == 1 {
			c := chunk(map[string]any{"content": ""}, "error")
			c["error"] = map[string]any{"code": "server_error", "message": "Provider disconnected unexpectedly"}
			send(c)
			return // the connection ends: no usage, no [DONE]
		}
		send(chunk(map[string]any{"content": word, rw: nil}, nil))
	}
	last := chunk(map[string]any{"content": ""}, "stop")
	switch f.Vendor {
	case "zhipu":
		last["usage"] = f.usage(a) // always, with the finish reason
		send(last)
	case "moonshot":
		last["choices"].([]any)[0].(map[string]any)["usage"] = f.usage(a) // inside the choice
		send(last)
	default:
		send(last)
		if includeUsage {
			u := chunk(nil, nil)
			u["choices"], u["usage"] = []any{}, f.usage(a)
			send(u)
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
}
