package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestRealtimeConformance checks OpenAI's Realtime API, GA and beta,
// against the fixtures under testdata/realtime: the upstream socket opened
// with the channel's key alone, every output cap kept within what was
// reserved, transcription refused without a price and measured with one,
// and response.done's usage read for billing.
func TestRealtimeConformance(t *testing.T) {
	adaptertest.RunRealtime(t, adaptertest.RealtimeSuite{
		Name:       "openai",
		KeyHeader:  "Authorization",
		CapMembers: []string{"max_output_tokens", "max_response_output_tokens"},
	})
}
