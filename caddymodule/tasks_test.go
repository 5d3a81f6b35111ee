package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestTaskDirectiveOrder: outside a route block the task handler sits
// after authentication and before the relay, which answers every path.
func TestTaskDirectiveOrder(t *testing.T) {
	src := "{\n\tgateway\n}\n:8080 {\n\tgateway_relay\n\tgateway_tasks\n\tgateway_auth\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	auth, tasks, relay := strings.Index(s, `"gateway_auth"`), strings.Index(s, `"gateway_tasks"`), strings.Index(s, `"gateway_relay"`)
	if auth < 0 || !(auth < tasks && tasks < relay) {
		t.Fatalf("handlers in the wrong order: %s", out)
	}
}
