package billing

import (
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// A limits line sets its limit to a whole number, 0 for none; a negative
// or unknown one is refused saying so.
func TestSetLimit(t *testing.T) {
	var l store.Limits
	for opt, v := range map[string]string{"rpm": "60", "tpm": "0", "max_parallel": "4"} {
		if err := SetLimit(&l, opt, v); err != nil {
			t.Fatalf("%s %s: %v", opt, v, err)
		}
	}
	if l != (store.Limits{RPM: 60, MaxParallel: 4}) {
		t.Fatalf("limits %+v", l)
	}
	for _, c := range []struct{ opt, v, want string }{{"rpm", "-1", "rpm must be a whole number"}, {"rph", "5", `unrecognized option "rph"`}} {
		if err := SetLimit(&l, c.opt, c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.opt, c.v, err, c.want)
		}
	}
}
