package relayhttp

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/bodies"
)

// A body budget's shares default to a quarter of it, and neither the
// budget nor a share is ever too small for one body at its limit.
func TestBodyLimits(t *testing.T) {
	for _, tt := range []struct {
		name                       string
		total, perKey, perAddr, at int64
		want                       bodies.Limits
	}{
		{"defaults", 256 << 20, 0, 0, 32 << 20, bodies.Limits{Total: 256 << 20, PerKey: 64 << 20, PerAddress: 64 << 20}},
		{"set", 256 << 20, 40 << 20, 100 << 20, 32 << 20, bodies.Limits{Total: 256 << 20, PerKey: 40 << 20, PerAddress: 100 << 20}},
		{"a quarter under one body", 64 << 20, 0, 0, 32 << 20, bodies.Limits{Total: 64 << 20, PerKey: 32<<20 + 1, PerAddress: 32<<20 + 1}},
		{"a total under one body", 1 << 20, 0, 0, 2 << 20, bodies.Limits{Total: 2<<20 + 1, PerKey: 2<<20 + 1, PerAddress: 2<<20 + 1}},
	} {
		if got := BodyLimits(tt.total, tt.perKey, tt.perAddr, tt.at); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
