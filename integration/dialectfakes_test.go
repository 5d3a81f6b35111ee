package integration

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

// Fake upstreams for the dialect tests. Each speaks its vendor's wire format
// as the API references describe it, and refuses with the vendor's own
// error what the real API refuses: a missing key or version header, tool
// results that do not answer the previous turn's calls, and (Gemini 3) a
// function call sent back without its thought signature. They all play
// the same weather bot: offered tools, it says "Checking." and calls
// get_weather for Paris and Rome in parallel; given the results, it says
// "Weather: <results>."; otherwise "Hello there".

// the counts every fake reports: 30 fresh + 5 cached prompt tokens, 12 out
const (
	fakePrompt     = 35
	fakeCached     = 5
	fakeCompletion = 12
	// fakeSignature is the thought signature the fake Gemini puts on its
	// first function call, base64 as Gemini sends it
	fakeSignature = "c2lnLXBhcmlz"
)

// seen is what a fake read from a request, for the tests to check.
type seen struct {
	Path       string
	Header     http.Header
	Model      string
	Stream     bool
	System     string
	Prompt     string   // text of the first user turn
	Image      []byte   // the image the first user turn carried
	Tools      []string // tool names offered
	Results    []string // tool results answering the previous turn, in order
	Signatures []string // thought signatures on function calls sent back (Gemini)
}

type fakeVendor struct {
	*httptest.Server
	vendor string
	key    string
	mu     sync.Mutex
	seen   []seen
}

func newFakeVendor(t *testing.T, vendor, key string) *fakeVendor {
	f := &fakeVendor{vendor: vendor, key: key}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeVendor) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

func (f *fakeVendor) record(s seen) {
	f.mu.Lock()
	f.seen = append(f.seen, s)
	f.mu.Unlock()
}

type fakeCall struct{ name, args string }

// answer is the weather bot: what to say and which calls to make.
func answer(s seen) (text string, calls []fakeCall) {
	switch {
	case len(s.Results) > 0:
		return "Weather: " + strings.Join(s.Results, ", ") + ".", nil
	case len(s.Tools) > 0:
		return "Checking.", []fakeCall{{"get_weather", `{"city":"Paris"}`}, {"get_weather", `{"city":"Rome"}`}}
	}
	return "Hello there", nil
}

func (f *fakeVendor) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	switch f.vendor {
	case "anthropic":
		f.anthropic(w, r, raw)
	case "gemini":
		f.gemini(w, r, raw)
	default:
		f.openai(w, r, raw)
	}
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func jsonAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// --- Anthropic: the Messages API ---

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	jsonAnswer(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// anthropicBlocks reads content that is a string or an array of blocks.
func anthropicBlocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var blocks []anthropicBlock
	_ = json.Unmarshal(raw, &blocks)
	return blocks
}

func (f *fakeVendor) anthropic(w http.ResponseWriter, r *http.Request, raw []byte) {
	if r.Header.Get("x-api-key") != f.key {
		anthropicError(w, 401, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		anthropicError(w, 400, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var req struct {
		Model     string          `json:"model"`
		MaxTokens *int64          `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		anthropicError(w, 400, "invalid_request_error", "model and messages are required")
		return
	}
	s := seen{Path: r.URL.Path, Header: r.Header.Clone(), Model: req.Model, Stream: req.Stream}
	if len(req.System) > 0 {
		for _, b := range anthropicBlocks(req.System) {
			s.System += b.Text
		}
	}
	for _, t := range req.Tools {
		if len(t.InputSchema) == 0 {
			anthropicError(w, 400, "invalid_request_error", "tools."+t.Name+".input_schema: Field required")
			return
		}
		s.Tools = append(s.Tools, t.Name)
	}
	var lastUses []string // tool_use ids of the previous assistant turn
	for i, m := range req.Messages {
		if i > 0 && m.Role == req.Messages[i-1].Role {
			anthropicError(w, 400, "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"")
			return
		}
		blocks := anthropicBlocks(m.Content)
		if m.Role == "assistant" {
			lastUses = nil
			for _, b := range blocks {
				if b.Type == "tool_use" {
					lastUses = append(lastUses, b.ID)
				}
			}
			continue
		}
		var results []string
		var answered []string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if i == 0 {
					s.Prompt += b.Text
				}
			case "image":
				if b.Source != nil && b.Source.Type == "base64" {
					s.Image, _ = base64.StdEncoding.DecodeString(b.Source.Data)
				}
			case "tool_result":
				if j >= len(lastUses) {
					anthropicError(w, 400, "invalid_request_error", fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come first and answer the previous tool_use blocks", i, j))
					return
				}
				answered = append(answered, b.ToolUseID)
				for _, rb := range anthropicBlocks(b.Content) {
					results = append(results, rb.Text)
				}
			}
		}
		if strings.Join(answered, ",") != strings.Join(lastUses, ",") {
			anthropicError(w, 400, "invalid_request_error", fmt.Sprintf("messages.%d: tool_use ids %v were found without tool_result blocks immediately after: %v", i, lastUses, answered))
			return
		}
		s.Results, lastUses = results, nil
	}
	f.record(s)
	if r.URL.Path == "/v1/messages/count_tokens" {
		jsonAnswer(w, 200, map[string]any{"input_tokens": 42})
		return
	}
	if r.URL.Path != "/v1/messages" || req.MaxTokens == nil {
		anthropicError(w, 400, "invalid_request_error", "max_tokens: Field required")
		return
	}
	text, calls := answer(s)
	stop := "end_turn"
	content := []any{map[string]any{"type": "text", "text": text}}
	for i, c := range calls {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", i+1), "name": c.name, "input": json.RawMessage(c.args)})
	}
	usage := map[string]any{"input_tokens": fakePrompt - fakeCached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": fakeCached, "output_tokens": fakeCompletion}
	msg := map[string]any{"id": "msg_fake1", "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		jsonAnswer(w, 200, msg)
		return
	}
	startSSE(w)
	start := map[string]any{"id": "msg_fake1", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": fakePrompt - fakeCached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": fakeCached, "output_tokens": 1}}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	sse(w, "ping", map[string]any{"type": "ping"})
	for _, word := range splitWords(text) {
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	for i, c := range calls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i + 1, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", i+1), "name": c.name, "input": map[string]any{}}})
		half := len(c.args) / 2
		for _, part := range []string{"", c.args[:half], c.args[half:]} {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i + 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i + 1})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": fakeCompletion}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// splitWords splits text into words that keep their following space, as
// models stream them.
func splitWords(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// --- Gemini: generateContent, streamGenerateContent?alt=sse, countTokens ---

func geminiError(w http.ResponseWriter, status int, rpc, msg string) {
	jsonAnswer(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": rpc}})
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	InlineData       *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
	FunctionCall *struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse"`
}

func (f *fakeVendor) gemini(w http.ResponseWriter, r *http.Request, raw []byte) {
	if r.Header.Get("x-goog-api-key") != f.key {
		geminiError(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, method, _ := strings.Cut(rest, ":")
	if !ok || model == "" {
		geminiError(w, 404, "NOT_FOUND", "no such method")
		return
	}
	var body struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		SystemInstruction *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		geminiError(w, 400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	if method == "countTokens" {
		f.record(seen{Path: r.URL.Path, Header: r.Header.Clone(), Model: model})
		jsonAnswer(w, 200, map[string]any{"totalTokens": 42})
		return
	}
	stream := method == "streamGenerateContent"
	if (method != "generateContent" && !stream) || (stream && r.URL.Query().Get("alt") != "sse") {
		geminiError(w, 400, "INVALID_ARGUMENT", "this fake serves generateContent and streamGenerateContent?alt=sse")
		return
	}
	if len(body.Contents) == 0 {
		geminiError(w, 400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	s := seen{Path: r.URL.Path, Header: r.Header.Clone(), Model: model, Stream: stream}
	if si := body.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				s.System += *p.Text
			}
		}
	}
	for _, t := range body.Tools {
		for _, d := range t.FunctionDeclarations {
			s.Tools = append(s.Tools, d.Name)
		}
	}
	var lastCalls []string
	for i, c := range body.Contents {
		switch c.Role {
		case "model":
			lastCalls = nil
			first := true
			for _, p := range c.Parts {
				if p.FunctionCall == nil {
					continue
				}
				if first && p.ThoughtSignature == "" {
					geminiError(w, 400, "INVALID_ARGUMENT", fmt.Sprintf("Function call `%s` in the %d. content block is missing a `thought_signature`.", p.FunctionCall.Name, i))
					return
				}
				if first {
					s.Signatures = append(s.Signatures, p.ThoughtSignature)
				}
				first = false
				lastCalls = append(lastCalls, p.FunctionCall.Name)
			}
		case "user", "":
			var answered, results []string
			for _, p := range c.Parts {
				switch {
				case p.Text != nil && i == 0:
					s.Prompt += *p.Text
				case p.InlineData != nil:
					s.Image, _ = base64.StdEncoding.DecodeString(p.InlineData.Data)
				case p.FunctionResponse != nil:
					answered = append(answered, p.FunctionResponse.Name)
					out, _ := json.Marshal(p.FunctionResponse.Response["output"])
					var text string
					if json.Unmarshal(out, &text) != nil {
						text = string(out)
					}
					results = append(results, text)
				}
			}
			if strings.Join(answered, ",") != strings.Join(lastCalls, ",") {
				geminiError(w, 400, "INVALID_ARGUMENT", "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
				return
			}
			s.Results, lastCalls = results, nil
		default:
			geminiError(w, 400, "INVALID_ARGUMENT", "Please use a valid role: user, model.")
			return
		}
	}
	f.record(s)
	text, calls := answer(s)
	usage := map[string]any{"promptTokenCount": fakePrompt, "candidatesTokenCount": fakeCompletion, "totalTokenCount": fakePrompt + fakeCompletion,
		"cachedContentTokenCount": fakeCached, "promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": fakePrompt}}}
	callParts := []any{}
	for i, c := range calls {
		var args map[string]any
		_ = json.Unmarshal([]byte(c.args), &args)
		p := map[string]any{"functionCall": map[string]any{"name": c.name, "args": args}}
		if i == 0 {
			p["thoughtSignature"] = fakeSignature
		}
		callParts = append(callParts, p)
	}
	resp := func(parts []any, finish string, u any) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "fake-resp-1"}
		if u != nil {
			out["usageMetadata"] = u
		}
		return out
	}
	if !stream {
		jsonAnswer(w, 200, resp(append([]any{map[string]any{"text": text}}, callParts...), "STOP", usage))
		return
	}
	startSSE(w)
	words := splitWords(text)
	for i, word := range words {
		parts := []any{map[string]any{"text": word}}
		if i == len(words)-1 {
			parts = append(parts, callParts...)
			sse(w, "", resp(parts, "STOP", usage))
			break
		}
		sse(w, "", resp(parts, "", map[string]any{"promptTokenCount": fakePrompt, "totalTokenCount": fakePrompt}))
	}
}

// --- OpenAI: chat completions with tools ---

func openaiError(w http.ResponseWriter, status int, typ, msg string) {
	jsonAnswer(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

func (f *fakeVendor) openai(w http.ResponseWriter, r *http.Request, raw []byte) {
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		openaiError(w, 401, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		openaiError(w, 404, "invalid_request_error", "Invalid URL")
		return
	}
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
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		openaiError(w, 400, "invalid_request_error", "We could not parse the JSON body of your request.")
		return
	}
	s := seen{Path: r.URL.Path, Header: r.Header.Clone(), Model: req.Model, Stream: req.Stream}
	for _, t := range req.Tools {
		s.Tools = append(s.Tools, t.Function.Name)
	}
	var open []string // tool call ids awaiting their tool message
	firstUser := true
	for i, m := range req.Messages {
		if len(open) > 0 && m.Role != "tool" {
			openaiError(w, 400, "invalid_request_error", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.")
			return
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
			s.System += text
		case "user":
			if firstUser {
				s.Prompt = text
				for _, p := range parts {
					if data, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,"); ok {
						s.Image, _ = base64.StdEncoding.DecodeString(data)
					}
				}
			}
			firstUser = false
			s.Results = nil
		case "assistant":
			for _, tc := range m.ToolCalls {
				open = append(open, tc.ID)
			}
			s.Results = nil
		case "tool":
			if len(open) == 0 || open[0] != m.ToolCallID {
				openaiError(w, 400, "invalid_request_error", fmt.Sprintf("Invalid parameter: messages[%d] with role 'tool' must be a response to a preceeding message with 'tool_calls'.", i))
				return
			}
			open = open[1:]
			s.Results = append(s.Results, text)
		}
	}
	f.record(s)
	text, calls := answer(s)
	finish := "stop"
	var toolCalls []any
	for i, c := range calls {
		finish = "tool_calls"
		toolCalls = append(toolCalls, map[string]any{"id": fmt.Sprintf("call_fake%d", i+1), "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
	}
	usage := map[string]any{"prompt_tokens": fakePrompt, "completion_tokens": fakeCompletion, "total_tokens": fakePrompt + fakeCompletion,
		"prompt_tokens_details": map[string]any{"cached_tokens": fakeCached}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil, "annotations": []any{}}
		if toolCalls != nil {
			msg["tool_calls"] = toolCalls
		}
		jsonAnswer(w, 200, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 1735689600, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}}, "usage": usage})
		return
	}
	startSSE(w)
	chunk := func(delta map[string]any, fin any) {
		sse(w, "", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1735689600, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": fin}}})
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	for _, word := range splitWords(text) {
		chunk(map[string]any{"content": word}, nil)
	}
	for i, c := range calls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_fake%d", i+1), "type": "function", "function": map[string]any{"name": c.name, "arguments": ""}}}}, nil)
		half := len(c.args) / 2
		for _, part := range []string{c.args[:half], c.args[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		sse(w, "", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1735689600, "model": req.Model, "choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}
