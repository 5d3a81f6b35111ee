package vertex_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/vertex"
)

// TestConformance checks Vertex AI's publisher paths (Gemini's wire at
// publishers/google, Claude's at publishers/anthropic with Vertex's
// anthropic_version), the absence of any key in the requests built, the
// answers and streams of both publishers and Google's error envelope
// against the fixtures under testdata/vertex, each from the public
// reference page it names.
func TestConformance(t *testing.T) {
	adaptertest.RunVertex(t, adaptertest.VertexSuite{
		Name:             "vertex",
		AnthropicVersion: vertex.AnthropicVersion,
		Refused:          []adapters.Operation{adapters.OpEmbedding, adapters.OpCompletion, adapters.OpRerank, adapters.OpSpeech},
	})
}
