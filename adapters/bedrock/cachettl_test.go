package bedrock_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/bedrock"
)

// Converse's usage.cacheDetails split the cache writes by TTL: the
// 1-hour share reaches the neutral usage, priced apart.
func TestCacheWriteLifetimes(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Model: "anthropic.claude-x", Chat: &adapters.ChatRequest{}}
	body := `{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn",
		"usage":{"inputTokens":10,"outputTokens":7,"totalTokens":3517,"cacheReadInputTokens":500,"cacheWriteInputTokens":3000,
		"cacheDetails":[{"inputTokens":2000,"ttl":"1h"},{"inputTokens":1000,"ttl":"5m"}]}}`
	resp, err := bedrock.Adapter{}.DecodeResponse(req, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Usage{PromptTokens: 3510, CompletionTokens: 7, CachedTokens: 500, CacheWriteTokens: 3000, CacheWrite1hTokens: 2000}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
}
