package engine

import (
	"testing"
	"time"
)

// The drain as configured: unset is the defaults, off (negative) no
// drain, and a set figure stands.
func TestConfiguredDrain(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		bytes   int64
		want    DrainBounds
	}{
		{0, 0, DrainBounds{Timeout: DefaultDrainTimeout, MaxBytes: DefaultDrainMaxBytes}},
		{-1, 0, DrainBounds{Timeout: 0, MaxBytes: DefaultDrainMaxBytes}},
		{5 * time.Second, 16 << 10, DrainBounds{Timeout: 5 * time.Second, MaxBytes: 16 << 10}},
	} {
		if got := ConfiguredDrain(c.timeout, c.bytes); got != c.want {
			t.Errorf("%v %d: %+v, want %+v", c.timeout, c.bytes, got, c.want)
		}
	}
}
