package gemini_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestTaskConformance checks Veo's whole task contract against the
// fixtures under testdata/tasks: a long-running operation submitted,
// polled, and its files fetched with the key on the channel's host only.
func TestTaskConformance(t *testing.T) {
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      "gemini",
		KeyHeader: "x-goog-api-key",
		Owned:     []string{"model", "durationSeconds", "sampleCount"},
		Fetcher:   true,
	})
}
