package kling_test

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/kling"
)

// TestConformance checks Kling's whole task contract against the fixtures
// under testdata/tasks. The clock is fixed so the signed token, and so the
// goldens, are the same on every run.
func TestConformance(t *testing.T) {
	signedAt := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a := kling.Adapter{TokenTTL: caddy.Duration(kling.DefaultTokenTTL)}
	adaptertest.RunTasks(t, adaptertest.TaskSuite{
		Name:      kling.Name,
		Provider:  kling.WithClock(a, func() time.Time { return signedAt }),
		Key:       "ak-kit-access:sk-kit-secret",
		KeyHeader: "Authorization",
		Callback:  true,
		Owned:     []string{"model_name", "duration", "mode", "sound"},
	})
}
