package integration

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// An adapter's options come from the channel's block in the Caddyfile and
// reach the upstream: the Anthropic adapter's version and max_tokens on a
// request it translates, each channel with its own.
func TestAdapterOptionsFromConfig(t *testing.T) {
	pinned := gatewaytest.NewFakeAnthropic(t, "sk-ant-pinned")
	plain := gatewaytest.NewFakeAnthropic(t, "sk-ant-plain")
	gw := gatewaytest.Start(t, gatewayConfig().
		channel("pinned", block("anthropic", "version 2024-10-22", "max_tokens 777"), "{{PINNED}}", "sk-ant-pinned", "claude-pinned").
		channel("plain", "anthropic", "{{PLAIN}}", "sk-ant-plain", "claude-plain").
		free("claude-pinned", "claude-plain").
		withAddress(":{{PORT}}").
		withSite("gateway_auth", "gateway_relay").String(), gatewaytest.Vars{"PINNED": pinned.BaseURL(), "PLAIN": plain.BaseURL()})
	key := gw.AddUser("opts", 0)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	for _, model := range []string{"claude-pinned", "claude-plain"} {
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	check := func(f *gatewaytest.FakeAnthropic, version string, maxTokens float64) {
		t.Helper()
		reqs := f.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests, want 1", len(reqs))
		}
		if got := reqs[0].Header.Get("anthropic-version"); got != version {
			t.Errorf("anthropic-version %q, want %q", got, version)
		}
		if got, _ := reqs[0].Body["max_tokens"].(float64); got != maxTokens {
			t.Errorf("max_tokens %v, want %v", reqs[0].Body["max_tokens"], maxTokens)
		}
	}
	check(pinned, "2024-10-22", 777)
	check(plain, "2023-06-01", 4096)
}
