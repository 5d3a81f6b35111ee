package gatewaytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// responses answers POST /v1/responses, OpenAI's Responses API, as its API
// reference describes it: a response object, or a stream of named events
// with sequence numbers ending with response.completed, which carries the
// whole response and its usage. It reads the request into rec (the
// instructions as System) and refuses, as OpenAI does, a
// function_call_output whose call is not in the input and a stream_options
// the Responses API does not have.
func (f *FakeOpenAI) responses(w http.ResponseWriter, cfg *Behavior, i int, raw []byte) {
	rec := f.Requests()[i]
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
	if strings.Contains(string(req.StreamOptions), "include_usage") {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Unknown parameter: 'stream_options.include_usage'.")
		return
	}
	rec.Model, rec.Stream, rec.System = req.Model, req.Stream, req.Instructions
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		CallID  string          `json:"call_id"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(req.Input, &rec.Prompt) != nil {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Invalid type for 'input'.")
			return
		}
	}
	calls := map[string]bool{}
	firstUser := true
	for j, it := range items {
		switch {
		case it.Type == "function_call":
			calls[it.CallID] = true
		case it.Type == "function_call_output":
			if !calls[it.CallID] {
				writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "No tool call found for function call output with call_id "+it.CallID+".")
				return
			}
			var out string
			_ = json.Unmarshal(it.Output, &out)
			rec.Results = append(rec.Results, out)
		case it.Role == "user":
			rec.Results = nil
			if !firstUser {
				continue
			}
			firstUser = false
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL string `json:"image_url"`
			}
			if json.Unmarshal(it.Content, &rec.Prompt) != nil {
				_ = json.Unmarshal(it.Content, &parts)
			}
			for _, p := range parts {
				rec.Prompt += p.Text
				if data, ok := strings.CutPrefix(p.ImageURL, "data:image/png;base64,"); ok {
					rec.Image, _ = base64.StdEncoding.DecodeString(data)
				}
			}
		case it.Role == "system" || it.Role == "developer":
			var s string
			_ = json.Unmarshal(it.Content, &s)
			rec.System += s
		case it.Type == "" && it.Role == "":
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("Missing required parameter: 'input[%d].type'.", j))
			return
		}
	}
	f.update(i, &rec)

	text, fcalls := answer(cfg, &rec)
	id := fmt.Sprintf("resp_fake%d", i+1)
	msgID := fmt.Sprintf("msg_fake%d", i+1)
	msg := map[string]any{"id": msgID, "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}}}
	output := []any{msg}
	for j, c := range fcalls {
		output = append(output, map[string]any{"id": fmt.Sprintf("fc_fake%d", j+1), "type": "function_call", "status": "completed",
			"arguments": c.Args, "call_id": fmt.Sprintf("call_fake%d", j+1), "name": c.Name})
	}
	var usage any
	if !cfg.NoUsage {
		usage = map[string]any{"input_tokens": cfg.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": cfg.CachedTokens},
			"output_tokens": cfg.CompletionTokens, "output_tokens_details": map[string]any{"reasoning_tokens": cfg.ReasoningTokens},
			"total_tokens": cfg.PromptTokens + cfg.CompletionTokens}
	}
	var instructions any
	if req.Instructions != "" {
		instructions = req.Instructions
	}
	created := time.Now().Unix()
	response := func(status string, out []any, u any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": created, "status": status, "error": nil,
			"incomplete_details": nil, "instructions": instructions, "model": req.Model, "output": out,
			"parallel_tool_calls": true, "previous_response_id": nil, "store": false, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
			"top_p": 1.0, "truncation": "disabled", "usage": u, "metadata": map[string]any{}}
	}
	if !req.Stream {
		writeJSON(w, response("completed", output, usage))
		return
	}
	startSSE(w)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sse(w, typ, fields)
	}
	event("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	event("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"id": msgID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
	event("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": part})
	for _, word := range splitWords(text) {
		event("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": word, "logprobs": []any{}})
	}
	event("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}})
	part["text"] = text
	event("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": part})
	event("response.output_item.done", map[string]any{"output_index": 0, "item": msg})
	for j, c := range fcalls {
		itemID := fmt.Sprintf("fc_fake%d", j+1)
		added := map[string]any{"id": itemID, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": fmt.Sprintf("call_fake%d", j+1), "name": c.Name}
		event("response.output_item.added", map[string]any{"output_index": j + 1, "item": added})
		half := len(c.Args) / 2
		for _, d := range []string{c.Args[:half], c.Args[half:]} {
			event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": j + 1, "delta": d})
		}
		event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": j + 1, "arguments": c.Args})
		event("response.output_item.done", map[string]any{"output_index": j + 1, "item": output[j+1]})
	}
	event("response.completed", map[string]any{"response": response("completed", output, usage)})
}
