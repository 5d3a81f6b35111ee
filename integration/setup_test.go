// Package integration runs the real gateway binary from a Caddyfile and
// calls it with the vendors' official SDKs, against fake upstreams.
package integration

import (
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// openaiConfig is two OpenAI-type channels for gpt-4o-mini (primary at a
// higher priority, backup below it) and the prices the billing tests check.
func openaiConfig() *caddyfile {
	return gatewayConfig().
		option("token_cache_ttl 1s").
		option("max_request_body 64KB").
		channel("primary", "openai", "{{UP1}}", "{env.GATEWAY_TEST_UPSTREAM_KEY}",
			"gpt-4o-mini text-embedding-3-small gpt-3.5-turbo-instruct unpriced-model",
			"model_map mini-alias gpt-4o-mini", "priority 10").
		channel("backup", "openai", "{{UP2}}", "sk-up-2", "gpt-4o-mini").
		price("gpt-4o-mini", "input 0.15", "output 0.60", "cached_input 0.075").
		price("mini-alias", "input 0.15", "output 0.60").
		price("text-embedding-3-small", "input 0.02").
		price("gpt-3.5-turbo-instruct", "input 1.50", "output 2").
		withSite(
			block("log", "output stderr", block("format filter",
				"request>headers>X-Api-Key delete",
				"request>headers>X-Goog-Api-Key delete",
				block("request>uri query", "delete key"))),
			block("route",
				"gateway_auth",
				"# the identity is in placeholders for other handlers and logs",
				"header X-Gateway-User {http.vars.gateway.username}",
				"gateway_relay"))
}

type openaiSetup struct {
	gw      *gatewaytest.Gateway
	primary *gatewaytest.FakeOpenAI
	backup  *gatewaytest.FakeOpenAI
}

func startOpenAI(t *testing.T) *openaiSetup {
	t.Helper()
	return startOpenAIWith(t, openaiConfig())
}

// startOpenAIWith is startOpenAI with a variant of openaiConfig.
func startOpenAIWith(t *testing.T, cfg *caddyfile) *openaiSetup {
	t.Helper()
	t.Setenv("GATEWAY_TEST_UPSTREAM_KEY", "sk-up-1")
	s := &openaiSetup{
		primary: gatewaytest.NewFakeOpenAI(t, "sk-up-1"),
		backup:  gatewaytest.NewFakeOpenAI(t, "sk-up-2"),
	}
	s.backup.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the backup" })
	s.gw = gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP1": s.primary.URL, "UP2": s.backup.URL})
	return s
}

func (s *openaiSetup) client(key string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{option.WithBaseURL(s.gw.URL + "/v1/"), option.WithAPIKey(key)}, opts...)...)
	return &c
}

// TestMain fails the run if any gateway started by these tests logged a
// key that the tests issued or configured.
func TestMain(m *testing.M) { gatewaytest.Main(m) }
