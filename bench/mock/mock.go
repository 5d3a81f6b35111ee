// Package mock is a fast stand-in for OpenAI's chat completions endpoint,
// used by the benchmark harness as the upstream of every target. It speaks
// the real wire format (chat.completion objects and chat.completion.chunk
// server-sent events) so a gateway relays it exactly as it would relay
// OpenAI, and it spends as little CPU as it can doing so.
//
// It imports nothing from the gateway: the benchmark must judge the gateway
// from outside.
package mock

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StreamChunks is how many chat.completion.chunk events a stream carries
// before the optional usage chunk: one with the role, the content deltas,
// and one with finish_reason "stop".
const StreamChunks = 20

// Usage the mock reports for every answer.
const (
	PromptTokens     = 9
	CompletionTokens = 231
)

// content is the assistant's answer; it makes the non-streaming body about
// 1.4 KB, like a short real answer.
const content = "Hello! It is nice to hear from you. I am a language model, and I am happy to help with " +
	"whatever you are working on today. Here are a few things I can do: answer questions about science, " +
	"history, programming or nearly any other subject; help you draft, edit or summarise a piece of writing; " +
	"explain a concept step by step, with examples at the level of detail you prefer; brainstorm names, " +
	"ideas or plans; translate between languages; and review code, suggest fixes and explain error messages. " +
	"If you tell me a little about your goal, I can tailor the answer: for instance, whether you want a quick " +
	"overview or a thorough walk-through, a formal or a casual tone, bullet points or prose. I will do my best " +
	"to be accurate and clear, and I will say so when I am unsure. What would you like to start with? " +
	"Feel free to ask anything at all."

// Stats are the mock's counters, served as JSON at GET /_mock/stats.
type Stats struct {
	Requests    int64 `json:"requests"`     // chat completion requests answered (both kinds)
	Streams     int64 `json:"streams"`      // of which streaming
	OpenStreams int64 `json:"open_streams"` // streams being written now
	BadRequests int64 `json:"bad_requests"` // requests refused with 400
}

// Handler serves POST /v1/chat/completions plus a small control API under
// /_mock/ (stats, chunk delay, holding streams open). The zero value is not
// usable; call New.
type Handler struct {
	requests    atomic.Int64
	streams     atomic.Int64
	openStreams atomic.Int64
	badRequests atomic.Int64
	idSeq       atomic.Uint64
	chunkDelay  atomic.Int64 // nanoseconds between stream events

	mu   sync.Mutex
	hold chan struct{} // non-nil: streams wait on it after their first event
}

// New returns a Handler that waits chunkDelay between stream events.
func New(chunkDelay time.Duration) *Handler {
	h := &Handler{}
	h.chunkDelay.Store(int64(chunkDelay))
	return h
}

// Stats returns the counters.
func (h *Handler) Stats() Stats {
	return Stats{
		Requests:    h.requests.Load(),
		Streams:     h.streams.Load(),
		OpenStreams: h.openStreams.Load(),
		BadRequests: h.badRequests.Load(),
	}
}

// SetChunkDelay changes the pause between stream events.
func (h *Handler) SetChunkDelay(d time.Duration) { h.chunkDelay.Store(int64(d)) }

// Hold makes streams started from now on stop after their first event until
// Release is called, so a client can keep many streams open at once.
func (h *Handler) Hold() {
	h.mu.Lock()
	if h.hold == nil {
		h.hold = make(chan struct{})
	}
	h.mu.Unlock()
}

// Release lets held streams finish and stops holding new ones.
func (h *Handler) Release() {
	h.mu.Lock()
	if h.hold != nil {
		close(h.hold)
		h.hold = nil
	}
	h.mu.Unlock()
}

func (h *Handler) holdGate() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hold
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST for chat completions")
			return
		}
		h.chat(w, r)
	case "/v1/models", "/models":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"}]}`))
	case "/_mock/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.Stats())
	case "/_mock/config":
		if v := r.URL.Query().Get("chunk_delay"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "chunk_delay: "+err.Error())
				return
			}
			h.SetChunkDelay(d)
		}
		switch r.URL.Query().Get("hold") {
		case "1", "true":
			h.Hold()
		case "0", "false":
			h.Release()
		}
		w.WriteHeader(http.StatusNoContent)
	case "/_mock/release":
		h.Release()
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusNotFound, "no such path on the mock: "+r.URL.Path)
	}
}

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []json.RawMessage `json:"messages"`
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		h.badRequests.Add(1)
		writeError(w, http.StatusBadRequest, "request body is not valid JSON: "+err.Error())
		return
	}
	if req.Model == "" || len(req.Messages) == 0 {
		h.badRequests.Add(1)
		writeError(w, http.StatusBadRequest, "model and messages are required")
		return
	}
	h.requests.Add(1)
	model, _ := json.Marshal(req.Model)
	id := "chatcmpl-mock" + strconv.FormatUint(h.idSeq.Add(1), 36)
	created := time.Now().Unix()
	if !req.Stream {
		bp := bufPool.Get().(*[]byte)
		b := AppendCompletion((*bp)[:0], id, created, model)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
		*bp = b
		bufPool.Put(bp)
		return
	}
	h.streams.Add(1)
	h.openStreams.Add(1)
	defer h.openStreams.Add(-1)
	h.stream(w, r, id, created, model, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id string, created int64, model []byte, includeUsage bool) {
	delay := time.Duration(h.chunkDelay.Load())
	if v := r.URL.Query().Get("chunk_delay"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			delay = d
		}
	}
	hold := h.holdGate()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var timer *time.Timer
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for i := 0; i <= StreamChunks; i++ {
		if i == StreamChunks && !includeUsage {
			break
		}
		if i == 1 && hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if i > 0 && delay > 0 {
			if timer == nil {
				timer = time.NewTimer(delay)
				defer timer.Stop()
			} else {
				timer.Reset(delay)
			}
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		b := append((*bp)[:0], "data: "...)
		b = AppendChunk(b, i, id, created, model, includeUsage)
		b = append(b, "\n\n"...)
		*bp = b
		if !send(b) {
			return
		}
	}
	send([]byte("data: [DONE]\n\n"))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	m, _ := json.Marshal(msg)
	_, _ = w.Write([]byte(`{"error":{"message":` + string(m) + `,"type":"invalid_request_error","param":null,"code":null}}`))
}

// pieces is content cut into the deltas of a stream, each already
// JSON-quoted.
var pieces = func() [][]byte {
	n := StreamChunks - 2 // minus the role chunk and the finish chunk
	words := strings.SplitAfter(content, " ")
	out := make([][]byte, n)
	per := (len(words) + n - 1) / n
	for i := range n {
		lo, hi := min(i*per, len(words)), min((i+1)*per, len(words))
		q, _ := json.Marshal(strings.Join(words[lo:hi], ""))
		out[i] = q
	}
	return out
}()

var contentJSON, _ = json.Marshal(content)

var usageJSON = `{"prompt_tokens":` + strconv.Itoa(PromptTokens) +
	`,"completion_tokens":` + strconv.Itoa(CompletionTokens) +
	`,"total_tokens":` + strconv.Itoa(PromptTokens+CompletionTokens) +
	`,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0}` +
	`,"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`

// AppendCompletion appends a chat.completion object; model is the model
// name already JSON-quoted.
func AppendCompletion(b []byte, id string, created int64, model []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = append(b, model...)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = append(b, contentJSON...)
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = append(b, usageJSON...)
	b = append(b, `,"service_tier":"default","system_fingerprint":"fp_mock0001"}`...)
	return b
}

// AppendChunk appends the i-th chat.completion.chunk of a stream: 0 carries
// the role, 1..StreamChunks-2 the content, StreamChunks-1 the finish reason,
// and StreamChunks the usage (sent only when the client asked for it, in
// which case every chunk also carries "usage":null, as OpenAI does).
func AppendChunk(b []byte, i int, id string, created int64, model []byte, includeUsage bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = append(b, model...)
	b = append(b, `,"service_tier":"default","system_fingerprint":"fp_mock0001","choices":`...)
	switch {
	case i == 0:
		b = append(b, `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	case i < StreamChunks-1:
		b = append(b, `[{"index":0,"delta":{"content":`...)
		b = append(b, pieces[i-1]...)
		b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	case i == StreamChunks-1:
		b = append(b, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`...)
	default:
		b = append(b, `[],"usage":`...)
		b = append(b, usageJSON...)
		return append(b, '}')
	}
	if includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, '}')
}

// NewServer returns an http.Server for h tuned for a benchmark: no write
// timeout, so held streams stay open as long as the client wants.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
	}
}
