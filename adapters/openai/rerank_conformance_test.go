package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestRerankConformance checks the OpenAI-compatible rerank (vLLM,
// Infinity, TEI and other servers of the common shape) against the
// fixtures under testdata/rerank.
func TestRerankConformance(t *testing.T) {
	adaptertest.RunRerank(t, adaptertest.RerankSuite{Name: "openai", KeyHeader: "Authorization"})
}
