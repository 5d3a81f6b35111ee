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
	"sync/atomic"
	"testing"
	"time"
)

// FakeOpenAI is an upstream that speaks OpenAI's wire format as its API
// reference describes it: chat completions (JSON, and SSE chunks ending in
// data: [DONE], with the usage chunk only when stream_options.include_usage
// is set; tool calls, with tool messages that must answer every call of the
// assistant message before them), legacy completions, embeddings (float
// or base64 little-endian float32, with dimensions), and the Responses API
// (fakeresponses.go).
type FakeOpenAI struct {
	*httptest.Server
	Key string // the key it expects as Bearer
	recorder
	// cancelled counts streams the gateway hung up on before their end
	cancelled int
	// azure opens streams with Azure's prompt-filter chunk (FakeAzure)
	azure bool
	// Videos is the video API's job table (fakevideo.go).
	Videos *JobStore
	rt     realtimeState // the Realtime API (fakerealtime.go)
}

var _ Fake = (*FakeOpenAI)(nil)

// Cancelled is how many streams were cut off by the gateway's side.
func (f *FakeOpenAI) Cancelled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

// Behavior is how a fake upstream answers; change it with Set. FakeAnthropic
// and FakeGemini honour Reply, the token counts, NoUsage and FailStatus;
// BreakAfter and SpacedJSON are FakeOpenAI's, ChunkDelay FakeOpenAI's and
// FakeAnthropic's.
type Behavior struct {
	Reply            string // assistant text without tools, streamed a word a chunk
	PromptTokens     int64  // reported usage, cached tokens included
	CompletionTokens int64  // reported usage
	CachedTokens     int64  // reported cached prompt tokens
	// CacheWriteTokens are prompt tokens reported written to the cache,
	// CacheWrite1hTokens the share of them written for an hour
	// (FakeAnthropic's usage.cache_creation)
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	ReasoningTokens    int64         // reported reasoning tokens (FakeOpenAI's Responses API)
	FailStatus         int           // answer every request with this error status
	NoUsage            bool          // report no usage at all
	BreakAfter         int           // streams: drop the connection after this many chunks
	ChunkDelay         time.Duration // streams: pause before each chunk (FakeOpenAI, FakeAnthropic)
	// SpacedJSON: FakeOpenAI writes its stream chunks as Python's
	// json.dumps does ("usage": {"prompt_tokens": 12, ...})
	SpacedJSON bool

	// Faults, for the gateway's timeouts, limits and failover.
	FailBody   string      // with FailStatus: this body instead of OpenAI's 5xx error
	FailHeader http.Header // with FailStatus: extra headers (Retry-After)
	// HangBeforeHeaders holds every request without answering until the
	// gateway hangs up.
	HangBeforeHeaders bool
	// HangAfter: streams stop sending after this many chunks and hold the
	// connection open until the gateway hangs up.
	HangAfter int
	// FirstEvent: streams send this as their first and only data event
	// (an error chunk) and end.
	FirstEvent string
	// RedirectTo answers every request with a 307 to this URL.
	RedirectTo string
	// HugeBody answers non-streamed requests with a 200 JSON body this
	// many bytes long, sent without Content-Length.
	HugeBody int64
	// LongEvent: streams send, after the role chunk, one data line this
	// many bytes long.
	LongEvent int

	// Media is how the fakes answer image and audio requests (fakemedia.go).
	Media MediaBehavior
}

// Recorded is a request a fake received, and what it read from it.
type Recorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
	// RequestID is the id the fake sent back in x-request-id, as OpenAI
	// does, for matching a usage row to the upstream's records.
	RequestID string

	// What the fakes read of a generation request.
	Model      string
	Stream     bool
	System     string
	Prompt     string   // text of the first user turn
	Image      []byte   // the image the first user turn carried
	Tools      []string // tool names offered
	Results    []string // tool results answering the previous turn, in order
	Signatures []string // thought signatures on function calls sent back (Gemini)
	// Files are the file parts of a multipart upload, hashed as they
	// arrived (Body then holds its text fields).
	Files []UploadedFile
}

// fakeRequestIDs numbers the ids the fakes send back, unique in the process.
var fakeRequestIDs atomic.Int64

// NewFakeOpenAI starts a fake that expects key.
func NewFakeOpenAI(t testing.TB, key string) *FakeOpenAI {
	Secret(key)
	f := &FakeOpenAI{Key: key, Videos: &JobStore{}}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeOpenAI) BaseURL() string { return f.URL }

func writeOpenAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

func (f *FakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/videos") && f.Videos != nil {
		f.Videos.serveSora(w, r, f.Key)
		return
	}
	if r.URL.Path == "/v1/realtime" {
		f.realtime(w, r)
		return
	}
	f.handle(w, r, r.URL.Path)
}

// handle answers a request for the OpenAI API path route.
func (f *FakeOpenAI) handle(w http.ResponseWriter, r *http.Request, route string) {
	if f.media(w, r, route) {
		return // a multipart upload, read as it streams in
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	reqID := fmt.Sprintf("req_fake_%d", fakeRequestIDs.Add(1))
	cfg, i := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw, RequestID: reqID})
	w.Header().Set("X-Request-Id", reqID)

	// FakeAzure checked api-key; otherwise the key where any vendor puts
	// it, so the fake can play the others' errors too
	if !f.azure && r.Header.Get("Authorization") != "Bearer "+f.Key && r.Header.Get("X-Api-Key") != f.Key && r.Header.Get("X-Goog-Api-Key") != f.Key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if cfg.HangBeforeHeaders {
		<-r.Context().Done()
		f.mu.Lock()
		f.cancelled++
		f.mu.Unlock()
		return
	}
	if cfg.RedirectTo != "" {
		http.Redirect(w, r, cfg.RedirectTo, http.StatusTemporaryRedirect)
		return
	}
	if cfg.FailStatus != 0 {
		if cfg.FailBody != "" {
			for k, v := range cfg.FailHeader {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(cfg.FailStatus)
			io.WriteString(w, cfg.FailBody)
			return
		}
		writeOpenAIError(w, cfg.FailStatus, "server_error", "The server had an error while processing your request.")
		return
	}
	if cfg.HugeBody > 0 {
		if stream, _ := body["stream"].(bool); !stream {
			writeHuge(w, cfg.HugeBody)
			return
		}
	}
	if body == nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request.")
		return
	}
	model, _ := body["model"].(string)
	switch route {
	case "/v1/rerank":
		openAIRerank(w, raw, &cfg)
	case "/v1/chat/completions":
		rec := f.Requests()[i]
		if msg := readOpenAIChat(raw, &rec); msg != "" {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", msg)
			return
		}
		f.update(i, &rec)
		text, calls := answer(&cfg, &rec)
		if rec.Stream {
			f.stream(w, r, &cfg, model, body, text, calls)
			return
		}
		finish := "stop"
		message := map[string]any{"role": "assistant", "content": text, "refusal": nil, "annotations": []any{}}
		if len(calls) > 0 {
			finish = "tool_calls"
			message["tool_calls"] = openAIToolCalls(calls)
		}
		resp := map[string]any{
			"id": "chatcmpl-fake1", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "message": message}},
			"service_tier":       "default",
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
	case "/v1/responses":
		f.responses(w, &cfg, i, raw)
	case "/v1/images/generations":
		f.images(w, &cfg, model, body, 0)
	case "/v1/audio/speech":
		f.speech(w, r, &cfg, body)
	default:
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func openAIToolCalls(calls []Call) []any {
	var out []any
	for i, c := range calls {
		out = append(out, map[string]any{"id": fmt.Sprintf("call_fake%d", i+1), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
	}
	return out
}

// readOpenAIChat reads a chat completions body into rec, or says why the
// real API would refuse it.
func readOpenAIChat(raw []byte, rec *Recorded) string {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		return "We could not parse the JSON body of your request."
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	var open []string // tool call ids awaiting their tool message
	firstUser := true
	for i, m := range req.Messages {
		if len(open) > 0 && m.Role != "tool" {
			return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
		}
		var text string
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.Content, &text) != nil {
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		switch m.Role {
		case "system", "developer":
			rec.System += text
		case "user":
			if firstUser {
				rec.Prompt = text
				for _, p := range parts {
					if data, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,"); ok {
						rec.Image, _ = base64.StdEncoding.DecodeString(data)
					}
				}
			}
			firstUser = false
			rec.Results = nil
		case "assistant":
			for _, tc := range m.ToolCalls {
				open = append(open, tc.ID)
			}
			rec.Results = nil
		case "tool":
			if len(open) == 0 || open[0] != m.ToolCallID {
				return fmt.Sprintf("Invalid parameter: messages[%d] with role 'tool' must be a response to a preceeding message with 'tool_calls'.", i)
			}
			open = open[1:]
			rec.Results = append(rec.Results, text)
		}
	}
	return ""
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

func (f *FakeOpenAI) stream(w http.ResponseWriter, r *http.Request, cfg *Behavior, model string, body map[string]any, text string, calls []Call) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	created := time.Now().Unix()
	if cfg.FirstEvent != "" {
		fmt.Fprintf(w, "data: %s\n\n", cfg.FirstEvent)
		fl.Flush()
		return
	}
	n := 0
	send := func(choices []any, usage any) bool {
		if cfg.HangAfter > 0 && n >= cfg.HangAfter {
			<-r.Context().Done()
			f.mu.Lock()
			f.cancelled++
			f.mu.Unlock()
			return false
		}
		if cfg.LongEvent > 0 && n == 1 {
			// one line longer than the gateway takes
			line := bytes.Repeat([]byte("x"), cfg.LongEvent)
			w.Write([]byte("data: {\"pad\":\""))
			w.Write(line)
			w.Write([]byte("\"}\n\n"))
			fl.Flush()
		}
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
		if cfg.SpacedJSON {
			b = spaced(b)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		n++
		return true
	}
	if f.azure {
		// Azure's first chunk: the prompt's filter results, no choices
		filter := map[string]any{"hate": map[string]any{"filtered": false, "severity": "safe"}, "self_harm": map[string]any{"filtered": false, "severity": "safe"},
			"sexual": map[string]any{"filtered": false, "severity": "safe"}, "violence": map[string]any{"filtered": false, "severity": "safe"}}
		b, _ := json.Marshal(map[string]any{"choices": []any{}, "created": 0, "id": "", "model": "", "object": "",
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": filter}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	if !send(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil) {
		return
	}
	words := strings.Fields(text)
	for i, word := range words {
		if i < len(words)-1 {
			word += " "
		}
		if !send(choice(map[string]any{"content": word}, nil), nil) {
			return
		}
	}
	finish := "stop"
	for i, c := range calls {
		finish = "tool_calls"
		start := map[string]any{"index": i, "id": fmt.Sprintf("call_fake%d", i+1), "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(choice(map[string]any{"tool_calls": []any{start}}, nil), nil) {
			return
		}
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			if !send(choice(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil), nil) {
				return
			}
		}
	}
	if !send(choice(map[string]any{}, finish), nil) {
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

// writeHuge sends a chat completion padded to n bytes, a chunk at a time.
func writeHuge(w http.ResponseWriter, n int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	head := []byte(`{"id":"chatcmpl-huge","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`)
	tail := []byte(`"}}]}`)
	if _, err := w.Write(head); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for left := n - int64(len(head)+len(tail)); left > 0; left -= int64(len(chunk)) {
		c := chunk
		if left < int64(len(c)) {
			c = c[:left]
		}
		if _, err := w.Write(c); err != nil {
			return // the gateway hung up
		}
	}
	w.Write(tail)
}

// FakeVector is the embedding the fake returns for input i, component j.
func FakeVector(i, j, dims int) float32 { return float32(math.Sin(float64(i*dims + j + 1))) }
