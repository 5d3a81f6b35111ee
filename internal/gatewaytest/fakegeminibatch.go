package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API's batch mode on FakeBatchVendor, as its reference
// describes it: POST /v1beta/models/{model}:batchGenerateContent with the
// requests inline (batch.display_name required, input_config.requests.
// requests[] each a GenerateContentRequest and its metadata), answered with
// an Operation named batches/{id} whose metadata is the
// GenerateContentBatch; GET /v1beta/batches/{id}; POST
// /v1beta/batches/{id}:cancel, answered {}. A finished batch's operation
// is done and carries its answers twice, as the API does: in
// metadata.output and in response (GenerateContentBatchOutput), each
// inlinedResponses.inlinedResponses[] with the request's metadata. The key
// goes in x-goog-api-key (or ?key=).

const geminiBatchType = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"

type fakeGeminiRequest struct {
	Request  json.RawMessage `json:"request"`
	Metadata json.RawMessage `json:"metadata"`
}

// serveGemini answers the batch mode's paths; false when p is not one.
func (f *FakeBatchVendor) serveGemini(w http.ResponseWriter, r *http.Request) bool {
	p, ok := strings.CutPrefix(r.URL.Path, "/v1beta/")
	if !ok {
		return false
	}
	if r.Header.Get("X-Goog-Api-Key") != f.Key && r.URL.Query().Get("key") != f.Key {
		geminiError(w, http.StatusBadRequest, "API key not valid. Please pass a valid API key.")
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rest, ok := strings.CutPrefix(p, "models/"); ok && r.Method == http.MethodPost {
		model, method, _ := strings.Cut(rest, ":")
		if method != "batchGenerateContent" || model == "" {
			geminiError(w, http.StatusNotFound, "Method not found.")
			return true
		}
		f.createGemini(w, r, model)
		return true
	}
	rest, ok := strings.CutPrefix(p, "batches/")
	id, verb, _ := strings.Cut(rest, ":")
	b := f.batches[id]
	if !ok || b == nil || !b.gemini {
		geminiError(w, http.StatusNotFound, "Requested entity was not found.")
		return true
	}
	switch {
	case verb == "" && r.Method == http.MethodGet:
		f.polls++
		f.advance(b)
		writeJSON(w, f.geminiOperation(b))
	case verb == "cancel" && r.Method == http.MethodPost:
		if b.status == "BATCH_STATE_PENDING" || b.status == "BATCH_STATE_RUNNING" {
			b.status, b.cancelled = "cancelling", true
		}
		writeJSON(w, map[string]any{})
	default:
		geminiError(w, http.StatusNotFound, "Method not found.")
	}
	return true
}

func (f *FakeBatchVendor) createGemini(w http.ResponseWriter, r *http.Request, model string) {
	type inputConfig struct {
		Requests *struct {
			Requests []fakeGeminiRequest `json:"requests"`
		} `json:"requests"`
	}
	var req struct {
		Batch *struct {
			DisplayName  string       `json:"display_name"`
			DisplayName2 string       `json:"displayName"`
			InputConfig  *inputConfig `json:"input_config"`
			InputConfig2 *inputConfig `json:"inputConfig"`
		} `json:"batch"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Batch == nil {
		geminiError(w, http.StatusBadRequest, "Invalid JSON payload received.")
		return
	}
	bt := req.Batch
	ic := bt.InputConfig
	if ic == nil {
		ic = bt.InputConfig2
	}
	if bt.DisplayName == "" && bt.DisplayName2 == "" {
		geminiError(w, http.StatusBadRequest, "* BatchGenerateContentRequest.batch.display_name: Field is required")
		return
	}
	if ic == nil || ic.Requests == nil || len(ic.Requests.Requests) == 0 {
		geminiError(w, http.StatusBadRequest, "* BatchGenerateContentRequest.batch.input_config: Field is required")
		return
	}
	b := &fakeBatch{id: f.nextID("gembatch"), gemini: true, status: "BATCH_STATE_PENDING", model: model}
	for i, q := range ic.Requests.Requests {
		var body struct {
			Contents []struct {
				Role  string           `json:"role"`
				Parts []map[string]any `json:"parts"`
			} `json:"contents"`
			Model string `json:"model"`
		}
		if err := json.Unmarshal(q.Request, &body); err != nil || len(body.Contents) == 0 {
			geminiError(w, http.StatusBadRequest, fmt.Sprintf("* BatchGenerateContentRequest.batch.input_config.requests.requests[%d].request.contents: contents is not specified", i))
			return
		}
		for _, c := range body.Contents {
			if c.Role != "" && c.Role != "user" && c.Role != "model" {
				geminiError(w, http.StatusBadRequest, "Please use a valid role: user, model.")
				return
			}
		}
		var meta struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(q.Metadata, &meta)
		b.lines = append(b.lines, fakeBatchLine{CustomID: meta.Key, Body: q.Request, Params: q.Metadata})
	}
	f.models[model] = true
	f.batches[b.id] = b
	f.creates++
	writeJSON(w, f.geminiOperation(b))
}

// finishGemini ends b with its first done lines answered.
func (f *FakeBatchVendor) finishGemini(b *fakeBatch, done int) {
	var answers []map[string]any
	for i, l := range b.lines {
		if i >= done {
			continue
		}
		a := map[string]any{"metadata": l.Params}
		if f.fail != nil && f.fail(l.CustomID) {
			a["error"] = map[string]any{"code": 3, "message": "line refused"}
			b.failedN++
		} else {
			prompt, completion := BatchUsage(i)
			a["response"] = map[string]any{
				"candidates": []map[string]any{{"content": map[string]any{"role": "model", "parts": []map[string]any{{"text": "ok"}}},
					"finishReason": "STOP", "index": 0}},
				"usageMetadata": map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion},
				"modelVersion":  b.model, "responseId": fmt.Sprintf("resp-%d", i)}
			b.succeededN++
		}
		answers = append(answers, a)
	}
	b.answers = answers
	b.status = "BATCH_STATE_SUCCEEDED"
	if b.cancelled {
		b.status = "BATCH_STATE_CANCELLED"
	}
}

func (f *FakeBatchVendor) geminiOperation(b *fakeBatch) map[string]any {
	n := len(b.lines)
	pending := n - b.succeededN - b.failedN
	if b.status == "BATCH_STATE_SUCCEEDED" || b.status == "BATCH_STATE_CANCELLED" {
		pending = 0
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	state := b.status
	if state == "cancelling" {
		state = "BATCH_STATE_RUNNING"
	}
	meta := map[string]any{"@type": geminiBatchType, "model": "models/" + b.model, "displayName": "batch", "name": "batches/" + b.id,
		"createTime": now, "updateTime": now, "state": state, "batchStats": map[string]any{
			"requestCount": strconv.Itoa(n), "successfulRequestCount": strconv.Itoa(b.succeededN),
			"failedRequestCount": strconv.Itoa(b.failedN), "pendingRequestCount": strconv.Itoa(pending)}}
	op := map[string]any{"name": "batches/" + b.id, "metadata": meta}
	if b.answers != nil || state == "BATCH_STATE_SUCCEEDED" || state == "BATCH_STATE_CANCELLED" {
		out := map[string]any{"inlinedResponses": map[string]any{"inlinedResponses": b.answers}}
		meta["output"] = out
		meta["endTime"] = now
		op["done"] = true
		op["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
			"inlinedResponses": out["inlinedResponses"]}
	}
	return op
}
