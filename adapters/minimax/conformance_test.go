package minimax_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/minimax"
)

// TestConformance checks MiniMax's whole task contract against the
// fixtures under testdata/tasks: a finished task's file id is resolved to
// its download URL in the same poll.
func TestConformance(t *testing.T) {
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      minimax.Name,
		KeyHeader: "Authorization",
		Callback:  true,
		Owned:     []string{"model", "first_frame_image", "duration", "resolution"},
	})
}
