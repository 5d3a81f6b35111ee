package gatewaytest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// FakePromptCache is an OpenAI-compatible upstream with several API keys
// that keeps a prompt cache per key, as OpenAI does: a prompt whose prefix
// (tools and messages up to a message boundary) this same key has seen
// reports that prefix as prompt_tokens_details.cached_tokens, counted as
// OpenAI counts it (only prompts of 1,024 tokens or more, in steps of 128).
// A prefix seen by another key is a miss. It answers chat completions,
// streamed (usage in the last chunk when stream_options.include_usage is
// set) or not.
type FakePromptCache struct {
	*httptest.Server
	Keys []string

	mu sync.Mutex
	// prefixes each key has cached, by hash of the prompt up to a message
	prefixes map[string]map[[32]byte]bool
	served   []Served
	// failing: how many more requests each key fails, and with what
	failing map[string]cacheFault
}

type cacheFault struct{ status, n int }

// Served is one answer of a FakePromptCache.
type Served struct {
	Key string
	// Conversation is the text of the prompt's first user message, which
	// tests use to tell conversations apart
	Conversation string
	PromptTokens int64
	CachedTokens int64
	Status       int
}

// maxCachedPrefixes bounds each key's cache, as a vendor evicts.
const maxCachedPrefixes = 100_000

// NewFakePromptCache starts a prompt-caching upstream that accepts keys.
func NewFakePromptCache(t testing.TB, keys ...string) *FakePromptCache {
	for _, k := range keys {
		Secret(k)
	}
	f := &FakePromptCache{Keys: keys, prefixes: map[string]map[[32]byte]bool{}, failing: map[string]cacheFault{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// Fail has key answer its next n requests with status (429: OpenAI's
// rate limit error, else its server error), without Retry-After.
func (f *FakePromptCache) Fail(key string, status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[key] = cacheFault{status, n}
}

// Served returns every request answered so far, in order.
func (f *FakePromptCache) Served() []Served {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.served)
}

// cacheRequest is what the fake reads of a chat completion.
type cacheRequest struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	Tools         json.RawMessage   `json:"tools"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (f *FakePromptCache) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !slices.Contains(f.Keys, key) {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var req cacheRequest
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Messages) == 0 {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request.")
		return
	}
	f.mu.Lock()
	fault := f.failing[key]
	if fault.n > 0 {
		f.failing[key] = cacheFault{fault.status, fault.n - 1}
	}
	f.mu.Unlock()
	prompt, cached, conv := f.lookup(key, &req, fault.n == 0)
	f.mu.Lock()
	if fault.n > 0 {
		f.served = append(f.served, Served{Key: key, Conversation: conv, Status: fault.status})
		f.mu.Unlock()
		if fault.status == http.StatusTooManyRequests {
			writeOpenAIError(w, fault.status, "requests", "Rate limit reached for requests. Please try again in 1s.")
		} else {
			writeOpenAIError(w, fault.status, "server_error", "The server had an error while processing your request.")
		}
		return
	}
	f.served = append(f.served, Served{Key: key, Conversation: conv, PromptTokens: prompt, CachedTokens: cached, Status: http.StatusOK})
	f.mu.Unlock()

	text := fmt.Sprintf("Answer %d.", len(req.Messages))
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}}
	id := fmt.Sprintf("chatcmpl-cache%d", fakeRequestIDs.Add(1))
	if !req.Stream {
		writeJSONStatus(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   usage})
		return
	}
	startSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": text}, nil))
	sse(w, "", chunk(map[string]any{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": req.Model, "choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// lookup counts the prompt's tokens (words, and 4 a message), finds the
// longest prefix key has cached, and (when store) caches every prefix of
// this prompt for key.
func (f *FakePromptCache) lookup(key string, req *cacheRequest, store bool) (prompt, cached int64, conv string) {
	h := sha256.New()
	h.Write(req.Tools)
	prompt = int64(len(strings.Fields(string(req.Tools))))
	sums := make([][32]byte, len(req.Messages))
	tokens := make([]int64, len(req.Messages))
	for i, m := range req.Messages {
		var msg struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(m, &msg)
		text := contentText(msg.Content)
		if conv == "" && msg.Role == "user" {
			conv = text
		}
		h.Write(m)
		copy(sums[i][:], h.Sum(nil))
		prompt += int64(len(strings.Fields(text))) + 4
		tokens[i] = prompt
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := f.prefixes[key]
	if seen == nil {
		seen = map[[32]byte]bool{}
		f.prefixes[key] = seen
	}
	for i := len(sums) - 1; i >= 0; i-- {
		if seen[sums[i]] {
			cached = tokens[i]
			break
		}
	}
	if cached < 1024 {
		cached = 0
	}
	cached -= cached % 128
	for _, s := range sums {
		if store && len(seen) < maxCachedPrefixes {
			seen[s] = true
		}
	}
	return prompt, cached, conv
}

// contentText is a message content's text: a string, or its text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte(' ')
	}
	return b.String()
}
