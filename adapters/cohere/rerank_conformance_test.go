package cohere_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/cohere"
)

// TestConformance checks Cohere's rerank contract against the fixtures
// under testdata/rerank.
func TestConformance(t *testing.T) {
	adaptertest.RunRerank(t, adaptertest.RerankSuite{Name: cohere.Name, KeyHeader: "Authorization", RerankOnly: true})
}
