package gatewaytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeBatchVendor speaks two vendors' batch APIs as their references
// describe them, on one server:
//
//   - OpenAI: POST /v1/files (multipart, purpose batch), GET
//     /v1/files/{id}/content, POST /v1/batches, GET /v1/batches/{id},
//     POST /v1/batches/{id}/cancel, with the key as a Bearer token;
//   - Azure OpenAI: the same under /openai/ (files, batches), with the key
//     in api-key and api-version required, lines addressed without /v1;
//   - Anthropic: POST /v1/messages/batches (requests inline), GET
//     /v1/messages/batches/{id}, POST .../cancel, GET .../results (JSONL),
//     with the key in x-api-key and anthropic-version required;
//   - Gemini's batch mode: POST /v1beta/models/{model}:batchGenerateContent
//     (requests inline), GET /v1beta/batches/{id}, POST ...:cancel, the
//     answers inline in the finished operation (fakegeminibatch.go).
//
// A batch stays in progress while Hold is set; the first poll after it is
// released ends it: every line answered with usage Usage(i) for its index
// i, except the lines Fail names, which fail. A cancelled batch ends at its
// next poll with the first half of its lines answered and the rest
// cancelled.
type FakeBatchVendor struct {
	*httptest.Server
	Key string

	mu      sync.Mutex
	hold    bool
	fail    func(customID string) bool
	files   map[string][]byte
	batches map[string]*fakeBatch
	creates int
	polls   int
	models  map[string]bool
	n       int
	azure   int
}

type fakeBatch struct {
	id, endpoint, status string
	anthropic            bool
	lines                []fakeBatchLine
	output, errors       string // file ids (OpenAI)
	results              []byte // JSONL (Anthropic)
	cancelled            bool
	// Gemini (fakegeminibatch.go)
	gemini              bool
	model               string
	answers             []map[string]any
	succeededN, failedN int
}

type fakeBatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
	Params   json.RawMessage `json:"params"`
}

// NewFakeBatchVendor starts a fake that expects key.
func NewFakeBatchVendor(t testing.TB, key string) *FakeBatchVendor {
	Secret(key)
	f := &FakeBatchVendor{Key: key, files: map[string][]byte{}, batches: map[string]*fakeBatch{}, models: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeBatchVendor) BaseURL() string { return f.URL }

// Hold keeps every batch in progress (true) or lets them end at their
// next poll (false).
func (f *FakeBatchVendor) Hold(on bool) {
	f.mu.Lock()
	f.hold = on
	f.mu.Unlock()
}

// FailLines makes the lines fail names fail.
func (f *FakeBatchVendor) FailLines(fail func(customID string) bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

// Creates counts the batches created; Polls the polls answered.
func (f *FakeBatchVendor) Creates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates
}

// AzureCalls counts the calls made at Azure OpenAI's addresses.
func (f *FakeBatchVendor) AzureCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.azure
}

// Polls counts the batch polls answered.
func (f *FakeBatchVendor) Polls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

// Models are the model names the batches' lines carried.
func (f *FakeBatchVendor) Models() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for m := range f.models {
		out = append(out, m)
	}
	return out
}

// BatchUsage is the usage the fake reports for line i of a batch: prompt
// and completion tokens.
func BatchUsage(i int) (prompt, completion int64) {
	return int64(10 + i%7), int64(3 + i%5)
}

func (f *FakeBatchVendor) serve(w http.ResponseWriter, r *http.Request) {
	if f.serveGemini(w, r) {
		return
	}
	p := r.URL.Path
	if strings.HasPrefix(p, "/v1/messages/batches") {
		if r.Header.Get("X-Api-Key") != f.Key {
			anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return
		}
		if r.Header.Get("Anthropic-Version") == "" {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
			return
		}
		f.serveAnthropic(w, r, strings.Trim(strings.TrimPrefix(p, "/v1/messages/batches"), "/"))
		return
	}
	if azure, ok := strings.CutPrefix(p, "/openai/"); ok {
		// Azure OpenAI: the same wire under /openai, api-key and api-version
		if r.Header.Get("Api-Key") != f.Key || r.URL.Query().Get("api-version") == "" {
			writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint."}})
			return
		}
		f.mu.Lock()
		f.azure++
		f.mu.Unlock()
		p = "/v1/" + azure
	} else if r.Header.Get("Authorization") != "Bearer "+f.Key {
		writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
		return
	}
	switch {
	case p == "/v1/files" && r.Method == http.MethodPost:
		f.upload(w, r)
	case strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content") && r.Method == http.MethodGet:
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")
		f.mu.Lock()
		b, ok := f.files[id]
		f.mu.Unlock()
		if !ok {
			openaiNotFound(w, "No such File object: "+id)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	case p == "/v1/batches" && r.Method == http.MethodPost:
		f.createOpenAI(w, r)
	case strings.HasPrefix(p, "/v1/batches/"):
		id, sub, _ := strings.Cut(strings.TrimPrefix(p, "/v1/batches/"), "/")
		f.mu.Lock()
		defer f.mu.Unlock()
		b, ok := f.batches[id]
		if !ok || b.anthropic {
			openaiNotFound(w, "No batch found with id '"+id+"'")
			return
		}
		switch {
		case sub == "cancel" && r.Method == http.MethodPost:
			if b.status == "in_progress" || b.status == "validating" {
				b.status, b.cancelled = "cancelling", true
			}
		case sub == "" && r.Method == http.MethodGet:
			f.polls++
			f.advance(b)
		default:
			openaiNotFound(w, "unknown path")
			return
		}
		writeJSON(w, f.openaiBatch(b))
	default:
		openaiNotFound(w, "unknown path "+p)
	}
}

func openaiNotFound(w http.ResponseWriter, msg string) {
	writeJSONStatus(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})
}

func (f *FakeBatchVendor) nextID(prefix string) string {
	f.n++
	return fmt.Sprintf("%s%d", prefix, f.n)
}

func (f *FakeBatchVendor) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	if r.FormValue("purpose") != "batch" {
		writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "purpose must be batch", "type": "invalid_request_error"}})
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "file is required", "type": "invalid_request_error"}})
		return
	}
	b, _ := io.ReadAll(file)
	f.mu.Lock()
	id := f.nextID("file-up")
	f.files[id] = b
	f.mu.Unlock()
	writeJSON(w, map[string]any{"id": id, "object": "file", "bytes": len(b), "created_at": time.Now().Unix(),
		"filename": hdr.Filename, "purpose": "batch", "status": "processed"})
}

func (f *FakeBatchVendor) createOpenAI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID      string `json:"input_file_id"`
		Endpoint         string `json:"endpoint"`
		CompletionWindow string `json:"completion_window"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.CompletionWindow != "24h" {
		writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "input_file_id, endpoint and completion_window 24h are required", "type": "invalid_request_error"}})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	content, ok := f.files[req.InputFileID]
	if !ok {
		openaiNotFound(w, "No such File object: "+req.InputFileID)
		return
	}
	b := &fakeBatch{id: f.nextID("batch_up"), endpoint: req.Endpoint, status: "in_progress"}
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l fakeBatchLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.URL != req.Endpoint || l.Method != http.MethodPost {
			writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "invalid batch line", "type": "invalid_request_error"}})
			return
		}
		f.noteModel(l.Body)
		b.lines = append(b.lines, l)
	}
	f.batches[b.id] = b
	f.creates++
	writeJSON(w, f.openaiBatch(b))
}

func (f *FakeBatchVendor) noteModel(body json.RawMessage) {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m)
	f.models[m.Model] = true
}

// advance ends a batch at a poll when it is released or cancelled.
func (f *FakeBatchVendor) advance(b *fakeBatch) {
	if b.gemini {
		switch {
		case b.status == "cancelling":
			f.finishGemini(b, len(b.lines)/2)
		case b.status == "BATCH_STATE_PENDING" && !f.hold:
			f.finishGemini(b, len(b.lines))
		case b.status == "BATCH_STATE_PENDING":
			b.status = "BATCH_STATE_RUNNING"
		case b.status == "BATCH_STATE_RUNNING" && !f.hold:
			f.finishGemini(b, len(b.lines))
		}
		return
	}
	switch {
	case b.status == "cancelling" || b.status == "canceling":
		f.finish(b, len(b.lines)/2)
	case (b.status == "in_progress") && !f.hold:
		f.finish(b, len(b.lines))
	}
}

// finish ends b with its first done lines answered.
func (f *FakeBatchVendor) finish(b *fakeBatch, done int) {
	var out, errs bytes.Buffer
	for i, l := range b.lines {
		prompt, completion := BatchUsage(i)
		failed := f.fail != nil && f.fail(l.CustomID)
		if b.anthropic {
			var res any
			switch {
			case i >= done:
				res = map[string]any{"type": "canceled"}
			case failed:
				res = map[string]any{"type": "errored", "error": map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "line refused"}}}
			default:
				res = map[string]any{"type": "succeeded", "message": map[string]any{"id": fmt.Sprintf("msg_%d", i), "type": "message", "role": "assistant",
					"model": "claude", "content": []map[string]any{{"type": "text", "text": "ok"}}, "stop_reason": "end_turn", "stop_sequence": nil,
					"usage": map[string]any{"input_tokens": prompt, "output_tokens": completion, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}
			}
			line, _ := json.Marshal(map[string]any{"custom_id": l.CustomID, "result": res})
			out.Write(append(line, '\n'))
			continue
		}
		if i >= done {
			continue
		}
		var body any
		status := http.StatusOK
		switch {
		case failed:
			status = http.StatusBadRequest
			body = map[string]any{"error": map[string]any{"message": "line refused", "type": "invalid_request_error"}}
		case strings.TrimPrefix(b.endpoint, "/v1") == "/embeddings":
			body = map[string]any{"object": "list", "data": []map[string]any{{"object": "embedding", "index": 0, "embedding": []float64{0.1, 0.2}}},
				"model": "m", "usage": map[string]any{"prompt_tokens": prompt, "total_tokens": prompt}}
		case strings.TrimPrefix(b.endpoint, "/v1") == "/responses":
			body = map[string]any{"id": fmt.Sprintf("resp_%d", i), "object": "response", "status": "completed", "model": "m",
				"output": []map[string]any{{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "ok"}}}},
				"usage":  map[string]any{"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}}
		default:
			body = map[string]any{"id": fmt.Sprintf("chatcmpl-%d", i), "object": "chat.completion", "created": time.Now().Unix(), "model": "m",
				"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
		}
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("batch_req_%d", i), "custom_id": l.CustomID,
			"response": map[string]any{"status_code": status, "request_id": fmt.Sprintf("req_%d", i), "body": body}, "error": nil})
		if failed {
			errs.Write(append(line, '\n'))
		} else {
			out.Write(append(line, '\n'))
		}
	}
	if b.anthropic {
		b.results, b.status = out.Bytes(), "ended"
		return
	}
	if out.Len() > 0 {
		b.output = f.nextID("file-out")
		f.files[b.output] = out.Bytes()
	}
	if errs.Len() > 0 {
		b.errors = f.nextID("file-err")
		f.files[b.errors] = errs.Bytes()
	}
	b.status = "completed"
	if b.cancelled {
		b.status = "cancelled"
	}
}

func (f *FakeBatchVendor) openaiBatch(b *fakeBatch) map[string]any {
	m := map[string]any{"id": b.id, "object": "batch", "endpoint": b.endpoint, "status": b.status,
		"input_file_id": "file-up", "completion_window": "24h", "created_at": time.Now().Unix(),
		"request_counts": map[string]int{"total": len(b.lines), "completed": 0, "failed": 0}}
	if b.output != "" {
		m["output_file_id"] = b.output
	}
	if b.errors != "" {
		m["error_file_id"] = b.errors
	}
	return m
}

func (f *FakeBatchVendor) serveAnthropic(w http.ResponseWriter, r *http.Request, rest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, sub, _ := strings.Cut(rest, "/")
	if id == "" && r.Method == http.MethodPost {
		var req struct {
			Requests []fakeBatchLine `json:"requests"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Requests) == 0 {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", "requests: at least one is required")
			return
		}
		b := &fakeBatch{id: f.nextID("msgbatch_"), anthropic: true, status: "in_progress", lines: req.Requests}
		for _, l := range req.Requests {
			f.noteModel(l.Params)
		}
		f.batches[b.id] = b
		f.creates++
		writeJSON(w, f.anthropicBatch(b))
		return
	}
	b, ok := f.batches[id]
	if !ok || !b.anthropic {
		anthropicError(w, http.StatusNotFound, "not_found_error", "batch not found")
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		f.polls++
		f.advance(b)
		writeJSON(w, f.anthropicBatch(b))
	case sub == "cancel" && r.Method == http.MethodPost:
		if b.status == "in_progress" {
			b.status, b.cancelled = "canceling", true
		}
		writeJSON(w, f.anthropicBatch(b))
	case sub == "results" && r.Method == http.MethodGet:
		if b.status != "ended" {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", "batch has not ended")
			return
		}
		w.Header().Set("Content-Type", "application/x-jsonl")
		_, _ = w.Write(b.results)
	default:
		anthropicError(w, http.StatusNotFound, "not_found_error", "unknown path")
	}
}

func (f *FakeBatchVendor) anthropicBatch(b *fakeBatch) map[string]any {
	m := map[string]any{"id": b.id, "type": "message_batch", "processing_status": b.status,
		"request_counts": map[string]int{"processing": len(b.lines), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
		"created_at":     time.Now().UTC().Format(time.RFC3339), "expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"ended_at": nil, "cancel_initiated_at": nil, "archived_at": nil, "results_url": nil}
	if b.status == "ended" {
		m["results_url"] = f.URL + "/v1/messages/batches/" + b.id + "/results"
		m["request_counts"] = map[string]int{"processing": 0, "succeeded": len(b.lines), "errored": 0, "canceled": 0, "expired": 0}
	}
	return m
}
