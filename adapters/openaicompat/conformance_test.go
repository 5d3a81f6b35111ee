package openaicompat_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// presetNames are the registered presets, each with its fixtures under
// testdata/<preset>.
var presetNames = []string{"deepseek", "qwen", "moonshot", "zhipu", "doubao", "mistral", "openrouter", "ollama", "vllm", "lmstudio"}

// Each preset runs the chat kit over its vendor's wire.
func TestConformance(t *testing.T) {
	for _, name := range presetNames {
		t.Run(name, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Suite{
				Name:          name,
				Testdata:      "testdata/" + name,
				UpstreamModel: name + "-upstream",
				// usage asked for in a stream; the output limit under the
				// name the vendor reads
				PassthroughAdds: []string{"stream_options", "max_tokens", "max_completion_tokens"},
				Refusals:        refusals,
			})
		})
	}
}

var refusals = []adaptertest.Refusal{
	{Name: "document", Dialect: "anthropic", Body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`, Status: 400, Message: `"document"`},
	{Name: "count tokens", Dialect: "anthropic", Op: "count_tokens", Body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "count_tokens"},
}
