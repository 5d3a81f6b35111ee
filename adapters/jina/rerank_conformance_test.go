package jina_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/jina"
)

// TestConformance checks Jina's rerank contract against the fixtures
// under testdata/rerank.
func TestConformance(t *testing.T) {
	adaptertest.RunRerank(t, adaptertest.RerankSuite{Name: jina.Name, KeyHeader: "Authorization", RerankOnly: true})
}
