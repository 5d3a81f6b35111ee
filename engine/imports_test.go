package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// The engines below the Caddy layer import no Caddy package, directly or
// through another package, and no caddymodule: they are what the Caddy
// layer calls, not part of it, and are tested without it.
func TestNoCaddyImports(t *testing.T) {
	engines := []string{".", "../tasks/...", "../billing/...", "../account/...", "../routing/...",
		"../cache/...", "../internal/bodies/...", "../internal/serverside/...", "../internal/wsupgrade/...", "../metrics/...", "../keys/...", "../tokenizer/...", "../store/...", "../gatewaycmd/...", "../alerts/...", "../runtimecfg/...", "../relayhttp/...", "../health/...", "../web"}
	// the adapters package, not the vendors: each vendor is a Caddy guest module
	engines = append(engines, "../adapters")
	// the payments package, not the providers: each is a Caddy guest module
	engines = append(engines, "../payments")
	// a database's life across reloads, kept in Caddy's UsagePool by caddymodule
	engines = append(engines, "../gatewaydb/...")
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, engines...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		n++
		if strings.HasPrefix(p, "github.com/caddyserver/") || strings.HasSuffix(p, "/caddymodule") {
			t.Errorf("an engine package depends on %s", p)
		}
	}
	if n < 50 {
		t.Fatalf("go list named only %d packages: %s", n, out)
	}
}
