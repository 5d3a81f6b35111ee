package seedance_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/seedance"
)

// TestConformance checks Seedance's whole task contract against the
// fixtures under testdata/tasks.
func TestConformance(t *testing.T) {
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      seedance.Name,
		KeyHeader: "Authorization",
		Callback:  true,
		Owned:     []string{"model", "content", "duration", "frames", "resolution", "generate_audio"},
	})
}
