package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestLeaseTTLUnderThreeRenewalsRefused: a lease_ttl that renewals every
// token_cache_ttl could not keep alive is a configuration error, said in
// words, rather than slices running out between renewals.
func TestLeaseTTLUnderThreeRenewalsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := billingConfig("").option("token_cache_ttl 1s").option("lease_ttl 2s").String()
	cfg = strings.NewReplacer("{{ADMIN}}", "127.0.0.1:0", "{{DSN}}", filepath.Join(dir, "gw.db"),
		"{{UP}}", "http://127.0.0.1:9", "{{PORT}}", "0").Replace(cfg)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewaytest.Binary(t), "validate", "--config", path, "--adapter", "caddyfile")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "lease_ttl 2s is under three token_cache_ttl (3s)") {
		t.Fatalf("caddy validate with lease_ttl 2s and token_cache_ttl 1s: %v\n%s", err, out)
	}
}
