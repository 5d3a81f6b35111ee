package demo_test

import (
	"encoding/json"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestConformance sends OpenAI, Anthropic and Gemini clients' requests
// through the demo model's in-process transport, as the relay does, and
// checks its answers: echoed, billed the same streamed or not.
func TestConformance(t *testing.T) {
	adaptertest.RunLocal(t, adaptertest.LocalSuite{
		Name:    "demo",
		Options: json.RawMessage(`{"word_delay": "1ns"}`),
	})
}
