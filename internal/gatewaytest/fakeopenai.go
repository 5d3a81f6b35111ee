package gatewaytest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeOpenAI is an upstream that speaks OpenAI's wire format as its API
// reference describes it: chat completions (JSON, and SSE chunks ending in
// data: [DONE], with the usage chunk only when stream_options.include_usage
// is set), legacy completions, and embeddings (float or base64 little-endian
// float32, with dimensions).
type FakeOpenAI struct {
	*httptest.Server
	Key string // the key it expects as Bearer

	mu       sync.Mutex
	requests []Recorded
	b        Behavior
	// cancelled counts streams the gateway hung up on before their end
	cancelled int
}

// Cancelled is how many streams were cut off by the gateway's side.
func (f *FakeOpenAI) Cancelled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

// Behavior is how a fake upstream answers; change it with Set.
type Behavior struct {
	Reply            string        // assistant text, streamed a word a chunk
	PromptTokens     int64         // reported usage
	CompletionTokens int64         // reported usage
	CachedTokens     int64         // reported prompt_tokens_details.cached_tokens
	FailStatus       int           // answer every request with this error status
	NoUsage          bool          // report no usage at all
	BreakAfter       int           // streams: drop the connection after this many chunks
	ChunkDelay       time.Duration // streams: pause before each chunk
}

// Recorded is a request the fake received.
type Recorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// NewFakeOpenAI starts a fake that expects key.
func NewFakeOpenAI(t testing.TB, key string) *FakeOpenAI {
	f := &FakeOpenAI{Key: key, b: Behavior{Reply: "Hello from the fake upstream", PromptTokens: 10, CompletionTokens: 20}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// Set changes behaviour under the lock.
func (f *FakeOpenAI) Set(change func(b *Behavior)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.b)
}

// Requests returns what the fake received so far.
func (f *FakeOpenAI) Requests() []Recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Recorded(nil), f.requests...)
}

func writeOpenAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func (f *FakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.requests = append(f.requests, Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	cfg := f.b
	f.mu.Unlock()

	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if cfg.FailStatus != 0 {
		writeOpenAIError(w, cfg.FailStatus, "server_error", "The server had an error while processing your request.")
		return
	}
	if body == nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request.")
		return
	}
	model, _ := body["model"].(string)
	switch r.URL.Path {
	case "/v1/chat/completions":
		if stream, _ := body["stream"].(bool); stream {
			f.stream(w, r, &cfg, model, body)
			return
		}
		resp := map[string]any{
			"id": "chatcmpl-fake1", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"system_fingerprint": "fp_fake",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": cfg.Reply, "refusal": nil, "annotations": []any{}}}},
			"service_tier": "default",
		}
		if !cfg.NoUsage {
			resp["usage"] = cfg.usage()
		}
		writeJSON(w, resp)
	case "/v1/completions":
		resp := map[string]any{"id": "cmpl-fake1", "object": "text_completion", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "text": cfg.Reply, "finish_reason": "stop", "logprobs": nil}}}
		if !cfg.NoUsage {
			resp["usage"] = cfg.usage()
		}
		writeJSON(w, resp)
	case "/v1/embeddings":
		f.embeddings(w, &cfg, model, body)
	default:
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func (f *Behavior) usage() map[string]any {
	return map[string]any{
		"prompt_tokens": f.PromptTokens, "completion_tokens": f.CompletionTokens, "total_tokens": f.PromptTokens + f.CompletionTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": f.CachedTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// StreamChunks is how many data events a stream of reply carries before
// [DONE], without the usage chunk: a role chunk, a chunk a word, a finish chunk.
func StreamChunks(reply string) int { return len(strings.Fields(reply)) + 2 }

func (f *FakeOpenAI) stream(w http.ResponseWriter, r *http.Request, cfg *Behavior, model string, body map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	created := time.Now().Unix()
	n := 0
	send := func(choices []any, usage any) bool {
		if cfg.BreakAfter > 0 && n >= cfg.BreakAfter {
			// drop the connection mid-stream, as a crashed upstream would
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
			return false
		}
		if cfg.ChunkDelay > 0 {
			select {
			case <-time.After(cfg.ChunkDelay):
			case <-r.Context().Done():
				f.mu.Lock()
				f.cancelled++
				f.mu.Unlock()
				return false
			}
		}
		chunk := map[string]any{"id": "chatcmpl-fake1", "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_fake", "choices": choices}
		if includeUsage {
			chunk["usage"] = usage
		}
		b, _ := json.Marshal(chunk)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		n++
		return true
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	if !send(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil) {
		return
	}
	words := strings.Fields(cfg.Reply)
	for i, word := range words {
		if i < len(words)-1 {
			word += " "
		}
		if !send(choice(map[string]any{"content": word}, nil), nil) {
			return
		}
	}
	if !send(choice(map[string]any{}, "stop"), nil) {
		return
	}
	if includeUsage && !cfg.NoUsage {
		if !send([]any{}, cfg.usage()) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (f *FakeOpenAI) embeddings(w http.ResponseWriter, cfg *Behavior, model string, body map[string]any) {
	var inputs []string
	switch in := body["input"].(type) {
	case string:
		inputs = []string{in}
	case []any:
		for _, v := range in {
			s, _ := v.(string)
			inputs = append(inputs, s)
		}
	}
	dims := 8
	if d, ok := body["dimensions"].(float64); ok {
		dims = int(d)
	}
	format, _ := body["encoding_format"].(string)
	var data []any
	for i := range inputs {
		vec := make([]float32, dims)
		for j := range vec {
			vec[j] = float32(math.Sin(float64(i*dims + j + 1)))
		}
		var emb any = vec
		if format == "base64" {
			var buf bytes.Buffer
			_ = binary.Write(&buf, binary.LittleEndian, vec)
			emb = base64.StdEncoding.EncodeToString(buf.Bytes())
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	resp := map[string]any{"object": "list", "data": data, "model": model}
	if !cfg.NoUsage {
		resp["usage"] = map[string]any{"prompt_tokens": cfg.PromptTokens, "total_tokens": cfg.PromptTokens}
	}
	writeJSON(w, resp)
}

// FakeVector is the embedding the fake returns for input i, component j.
func FakeVector(i, j, dims int) float32 { return float32(math.Sin(float64(i*dims + j + 1))) }
