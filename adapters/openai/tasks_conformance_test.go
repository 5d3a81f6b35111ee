package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestTaskConformance checks the Sora video API's whole task contract
// against the fixtures under testdata/tasks: a multipart submit, polled
// states, and files fetched with the channel's key.
func TestTaskConformance(t *testing.T) {
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      "openai",
		KeyHeader: "Authorization",
		Owned:     []string{"model", "prompt", "seconds", "size", "input_reference"},
		Fetcher:   true,
	})
}
