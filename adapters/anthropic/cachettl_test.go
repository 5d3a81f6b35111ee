package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Cache writes are split by lifetime (usage.cache_creation), which the
// vendor prices apart: the 1-hour share reaches the neutral usage, in a
// whole answer and in a stream's message_start, and goes back out to an
// Anthropic client translated from another upstream.
func TestCacheWriteLifetimes(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Model: "claude-x", Chat: &adapters.ChatRequest{}}
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":3000,
		"cache_read_input_tokens":500,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},"output_tokens":7}}`
	resp, err := prov.DecodeResponse(req, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Usage{PromptTokens: 3510, CompletionTokens: 7, CachedTokens: 500, CacheWriteTokens: 3000, CacheWrite1hTokens: 2000}
	if resp.Usage != want {
		t.Errorf("answer's usage %+v, want %+v", resp.Usage, want)
	}

	step := prov.NewStreamStep(req)
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],
		"usage":{"input_tokens":10,"cache_creation_input_tokens":3000,"cache_read_input_tokens":0,
		"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":3000},"output_tokens":1}}}`
	if _, _, err := step.Probe(&adapters.SSEEvent{Name: "message_start", Data: []byte(start)}); err != nil {
		t.Fatal(err)
	}
	u, _, err := step.Probe(&adapters.SSEEvent{Name: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`)})
	if err != nil || u == nil {
		t.Fatal(u, err)
	}
	if u.CacheWriteTokens != 3000 || u.CacheWrite1hTokens != 3000 || u.CompletionTokens != 9 {
		t.Errorf("stream's usage %+v", *u)
	}

	// an Anthropic client of another vendor's answer sees the split
	out := adapters.Response{Usage: want}
	out.Message.Role = adapters.RoleAssistant
	var got struct {
		Usage struct {
			CacheCreation *struct {
				Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
				Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
			} `json:"cache_creation"`
		} `json:"usage"`
	}
	b, err := ant.EncodeResponse(req, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Usage.CacheCreation == nil ||
		got.Usage.CacheCreation.Ephemeral5m != 1000 || got.Usage.CacheCreation.Ephemeral1h != 2000 {
		t.Errorf("encoded usage %s", b)
	}
}
