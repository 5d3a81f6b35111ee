package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The conformance kit runs testdata through every registered family.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Suite{
		Name:          "openai",
		UpstreamModel: "gpt-upstream",
		// a streamed passthrough asks for usage, so it can be billed
		PassthroughAdds: []string{"stream_options"},
		Refusals:        refusals,
	})
}

// The refusals every field's 400 is in TestDecodeRequestErrors; these are
// the ones across families.
var refusals = []adaptertest.Refusal{
	{Name: "not json", Body: `{"model":`, Status: 400, Message: "not valid JSON"},
	{Name: "completion no prompt", Op: adapters.OpCompletion, Body: `{"model":"m"}`, Status: 400, Message: "'prompt' is required"},
	{Name: "embedding no input", Op: adapters.OpEmbedding, Body: `{"model":"m"}`, Status: 400, Message: "'input' is required"},

	// what other dialects send that OpenAI cannot take
	{Name: "googleSearch", Dialect: "gemini", Body: `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"googleSearch":{}}]}`, Status: 400, Message: "googleSearch"},
	{Name: "document", Dialect: "anthropic", Body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`, Status: 400, Message: `"document"`},
	{Name: "count tokens", Dialect: "anthropic", Op: adapters.OpCountTokens, Body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "count_tokens"},
}
