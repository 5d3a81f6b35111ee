package gatewaytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// FakeResponses is an upstream that speaks OpenAI's Responses API
// (POST /v1/responses) as its API reference describes it: a response
// object, or a stream of named events with sequence numbers that ends with
// response.completed carrying the whole response and its usage. It plays
// the weather bot of the dialect tests: offered tools, it says "Checking."
// and calls get_weather for Paris and Rome; given the calls' outputs, it
// says "Weather: <outputs>."; otherwise "Hello there". It refuses, as
// OpenAI does, a function_call_output whose call is not in the input.
type FakeResponses struct {
	*httptest.Server
	Key string

	mu   sync.Mutex
	seen []ResponsesSeen
}

// The usage every answer reports: 35 input tokens (5 of them cached), 12
// output tokens (3 of them reasoning).
const (
	ResponsesInput     = 35
	ResponsesCached    = 5
	ResponsesOutput    = 12
	ResponsesReasoning = 3
)

// ResponsesSeen is what the fake read from one request.
type ResponsesSeen struct {
	Header       http.Header
	Raw          []byte
	Model        string
	Stream       bool
	Instructions string
	Prompt       string // text of the first user message
	Image        []byte // the image it carried
	Tools        []string
	Results      []string // function_call_output values, in order
}

// NewFakeResponses starts a fake that expects key as Bearer.
func NewFakeResponses(t testing.TB, key string) *FakeResponses {
	f := &FakeResponses{Key: key}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// Seen returns the requests so far.
func (f *FakeResponses) Seen() []ResponsesSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ResponsesSeen(nil), f.seen...)
}

func (f *FakeResponses) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}
	var req struct {
		Model        string          `json:"model"`
		Stream       bool            `json:"stream"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
		StreamOptions json.RawMessage `json:"stream_options"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.Model == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request.")
		return
	}
	if req.StreamOptions != nil && strings.Contains(string(req.StreamOptions), "include_usage") {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Unknown parameter: 'stream_options.include_usage'.")
		return
	}
	s := ResponsesSeen{Header: r.Header.Clone(), Raw: raw, Model: req.Model, Stream: req.Stream, Instructions: req.Instructions}
	for _, t := range req.Tools {
		s.Tools = append(s.Tools, t.Name)
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		CallID  string          `json:"call_id"`
		Output  json.RawMessage `json:"output"`
	}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		s.Prompt = text
	} else if err := json.Unmarshal(req.Input, &items); err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Invalid type for 'input'.")
		return
	}
	calls := map[string]bool{}
	for i, it := range items {
		switch {
		case it.Type == "function_call":
			calls[it.CallID] = true
		case it.Type == "function_call_output":
			if !calls[it.CallID] {
				writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID))
				return
			}
			var out string
			_ = json.Unmarshal(it.Output, &out)
			s.Results = append(s.Results, out)
		case it.Role == "user":
			s.Results = nil
			if s.Prompt != "" {
				continue
			}
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL string `json:"image_url"`
			}
			if json.Unmarshal(it.Content, &s.Prompt) != nil {
				_ = json.Unmarshal(it.Content, &parts)
			}
			for _, p := range parts {
				s.Prompt += p.Text
				if data, ok := strings.CutPrefix(p.ImageURL, "data:image/png;base64,"); ok {
					s.Image, _ = base64.StdEncoding.DecodeString(data)
				}
			}
		case it.Type == "" && it.Role == "":
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("Missing required parameter: 'input[%d].type'.", i))
			return
		}
	}
	f.mu.Lock()
	f.seen = append(f.seen, s)
	f.mu.Unlock()

	reply, fcalls := weatherBot(s.Tools, s.Results)
	id := "resp_fake" + fmt.Sprint(len(f.Seen()))
	msg := map[string]any{"id": "msg_fake", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": reply, "annotations": []any{}, "logprobs": []any{}}}}
	output := []any{msg}
	for i, c := range fcalls {
		output = append(output, map[string]any{"id": fmt.Sprintf("fc_fake%d", i+1), "type": "function_call", "status": "completed",
			"arguments": c[1], "call_id": fmt.Sprintf("call_fake%d", i+1), "name": c[0]})
	}
	usage := map[string]any{"input_tokens": ResponsesInput, "input_tokens_details": map[string]any{"cached_tokens": ResponsesCached},
		"output_tokens": ResponsesOutput, "output_tokens_details": map[string]any{"reasoning_tokens": ResponsesReasoning},
		"total_tokens": ResponsesInput + ResponsesOutput}
	response := func(status string, out []any, u any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": 1735689600, "status": status, "error": nil,
			"incomplete_details": nil, "instructions": nilIfEmpty(req.Instructions), "model": req.Model, "output": out,
			"parallel_tool_calls": true, "previous_response_id": nil, "store": false, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
			"top_p": 1.0, "truncation": "disabled", "usage": u, "metadata": map[string]any{}}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response("completed", output, usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	event("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	event("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"id": "msg_fake", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
	event("response.content_part.added", map[string]any{"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": part})
	for _, word := range strings.SplitAfter(reply, " ") {
		event("response.output_text.delta", map[string]any{"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": word, "logprobs": []any{}})
	}
	event("response.output_text.done", map[string]any{"item_id": "msg_fake", "output_index": 0, "content_index": 0, "text": reply, "logprobs": []any{}})
	part["text"] = reply
	event("response.content_part.done", map[string]any{"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": part})
	event("response.output_item.done", map[string]any{"output_index": 0, "item": msg})
	for i, c := range fcalls {
		itemID := fmt.Sprintf("fc_fake%d", i+1)
		added := map[string]any{"id": itemID, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": fmt.Sprintf("call_fake%d", i+1), "name": c[0]}
		event("response.output_item.added", map[string]any{"output_index": i + 1, "item": added})
		half := len(c[1]) / 2
		for _, d := range []string{c[1][:half], c[1][half:]} {
			event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i + 1, "delta": d})
		}
		event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i + 1, "arguments": c[1]})
		event("response.output_item.done", map[string]any{"output_index": i + 1, "item": output[i+1]})
	}
	event("response.completed", map[string]any{"response": response("completed", output, usage)})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// weatherBot is the fakes' one model: what to say and which calls to make.
func weatherBot(tools, results []string) (string, [][2]string) {
	switch {
	case len(results) > 0:
		return "Weather: " + strings.Join(results, ", ") + ".", nil
	case len(tools) > 0:
		return "Checking.", [][2]string{{"get_weather", `{"city":"Paris"}`}, {"get_weather", `{"city":"Rome"}`}}
	}
	return "Hello there", nil
}
