package vidu_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/vidu"
)

// TestConformance checks Vidu's whole task contract against the fixtures
// under testdata/tasks.
func TestConformance(t *testing.T) {
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      vidu.Name,
		KeyHeader: "Authorization",
		Callback:  true,
		Owned:     []string{"model", "images", "duration", "resolution", "is_rec", "audio"},
	})
}
