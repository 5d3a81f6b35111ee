package routing

import (
	"testing"
	"time"
)

// A configured health policy keeps the defaults of what it leaves unset.
func TestHealthPolicyWithDefaults(t *testing.T) {
	if got := (HealthPolicy{}).WithDefaults(); got != DefaultHealthPolicy {
		t.Fatalf("nothing set: %+v", got)
	}
	got := HealthPolicy{ConsecutiveFailures: 2, MaxEjection: time.Hour}.WithDefaults()
	if want := (HealthPolicy{ConsecutiveFailures: 2, BaseEjection: DefaultHealthPolicy.BaseEjection, MaxEjection: time.Hour}); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}
