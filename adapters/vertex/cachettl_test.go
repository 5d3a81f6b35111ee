package vertex

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Claude on Vertex reports its cache writes by lifetime as Anthropic does:
// the 1-hour share reaches the neutral usage, priced apart.
func TestClaudeCacheWriteLifetimes(t *testing.T) {
	a := provisioned(t, &Adapter{Project: "p"})
	if err := a.ProvisionChannel(adapters.ChannelSettings{Name: "c", Models: []string{"claude-sonnet-4-5@20250929"}}); err != nil {
		t.Fatal(err)
	}
	req := &adapters.Request{Op: adapters.OpChat, Model: "claude-sonnet-4-5@20250929", Chat: &adapters.ChatRequest{}}
	body := `{"id":"msg_vrtx_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":3000,
		"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},"output_tokens":7}}`
	resp, err := a.DecodeResponse(req, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CacheWriteTokens != 3000 || resp.Usage.CacheWrite1hTokens != 2000 || resp.Usage.PromptTokens != 3010 {
		t.Errorf("usage %+v", resp.Usage)
	}
}
