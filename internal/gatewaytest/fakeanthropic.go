package gatewaytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FakeAnthropic is an upstream that speaks Anthropic's Messages API as its
// reference describes it: POST /v1/messages (JSON, or the SSE events
// message_start, content_block_start/delta/stop, ping, message_delta,
// message_stop) and /v1/messages/count_tokens. It refuses what the real API
// refuses: a missing or wrong x-api-key, no anthropic-version, no
// max_tokens, a tool without input_schema, roles that do not alternate, and
// tool results that do not answer the previous turn's tool_use blocks.
type FakeAnthropic struct {
	*httptest.Server
	Key string // the key it expects in x-api-key
	recorder
}

var _ Fake = (*FakeAnthropic)(nil)

// NewFakeAnthropic starts a fake that expects key.
func NewFakeAnthropic(t testing.TB, key string) *FakeAnthropic {
	Secret(key)
	f := &FakeAnthropic{Key: key}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeAnthropic) BaseURL() string { return f.URL }

// CountTokens is what the fake's count_tokens answers.
const CountTokens = 42

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSONStatus(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
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

func (f *FakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	cfg, i := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	if r.Header.Get("x-api-key") != f.Key {
		anthropicError(w, 401, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		anthropicError(w, 400, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if cfg.FailStatus != 0 {
		typ := "api_error"
		if cfg.FailStatus == 529 {
			typ = "overloaded_error"
		}
		anthropicError(w, cfg.FailStatus, typ, "Internal server error")
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
	rec := f.Requests()[i]
	rec.Model, rec.Stream = req.Model, req.Stream
	if len(req.System) > 0 {
		for _, b := range anthropicBlocks(req.System) {
			rec.System += b.Text
		}
	}
	for _, t := range req.Tools {
		if len(t.InputSchema) == 0 {
			anthropicError(w, 400, "invalid_request_error", "tools."+t.Name+".input_schema: Field required")
			return
		}
		rec.Tools = append(rec.Tools, t.Name)
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
		var results, answered []string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if i == 0 {
					rec.Prompt += b.Text
				}
			case "image":
				if b.Source != nil && b.Source.Type == "base64" {
					rec.Image, _ = base64.StdEncoding.DecodeString(b.Source.Data)
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
		rec.Results, lastUses = results, nil
	}
	f.update(i, &rec)
	if r.URL.Path == "/v1/messages/count_tokens" {
		writeJSONStatus(w, 200, map[string]any{"input_tokens": CountTokens})
		return
	}
	if r.URL.Path != "/v1/messages" {
		anthropicError(w, 404, "not_found_error", "Not found")
		return
	}
	if req.MaxTokens == nil {
		anthropicError(w, 400, "invalid_request_error", "max_tokens: Field required")
		return
	}
	f.answer(w, r, &cfg, &rec)
}

func (f *FakeAnthropic) answer(w http.ResponseWriter, r *http.Request, cfg *Behavior, rec *Recorded) {
	text, calls := answer(cfg, rec)
	stop := "end_turn"
	content := []any{map[string]any{"type": "text", "text": text}}
	for i, c := range calls {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", i+1), "name": c.Name, "input": json.RawMessage(c.Args)})
	}
	// Anthropic counts input_tokens without the cached ones
	usage := func(output int64) map[string]any {
		if cfg.NoUsage {
			return map[string]any{"input_tokens": 0, "output_tokens": 0}
		}
		u := map[string]any{"input_tokens": cfg.PromptTokens - cfg.CachedTokens - cfg.CacheWriteTokens, "cache_creation_input_tokens": cfg.CacheWriteTokens,
			"cache_read_input_tokens": cfg.CachedTokens, "output_tokens": output}
		if cfg.CacheWriteTokens > 0 {
			// the writes by cache_control's ttl, as the Messages API reports them
			u["cache_creation"] = map[string]any{"ephemeral_5m_input_tokens": cfg.CacheWriteTokens - cfg.CacheWrite1hTokens,
				"ephemeral_1h_input_tokens": cfg.CacheWrite1hTokens}
		}
		return u
	}
	if !rec.Stream {
		writeJSONStatus(w, 200, map[string]any{"id": "msg_fake1", "type": "message", "role": "assistant", "model": rec.Model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage(cfg.CompletionTokens)})
		return
	}
	startSSE(w)
	start := map[string]any{"id": "msg_fake1", "type": "message", "role": "assistant", "model": rec.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage(1)}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	sse(w, "ping", map[string]any{"type": "ping"})
	for _, word := range splitWords(text) {
		if cfg.ChunkDelay > 0 {
			select {
			case <-time.After(cfg.ChunkDelay):
			case <-r.Context().Done():
				return
			}
		}
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	for i, c := range calls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i + 1, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", i+1), "name": c.Name, "input": map[string]any{}}})
		half := len(c.Args) / 2
		for _, part := range []string{"", c.Args[:half], c.Args[half:]} {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i + 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i + 1})
	}
	final := map[string]any{"output_tokens": cfg.CompletionTokens}
	if cfg.NoUsage {
		final["output_tokens"] = 0
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": final})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
