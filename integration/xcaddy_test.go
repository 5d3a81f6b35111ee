package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	// what the root package registers, to know what a plugin build must list
	_ "github.com/caddy-model-gateway/gateway"
)

// TestPluginBuild builds the gateway the way xcaddy does: a throwaway main
// module that requires this module through a replace directive and imports
// only its root package beside Caddy's standard modules. Its list-modules
// must show every gateway module and adapter this test process registers.
func TestPluginBuild(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(file))
	caddyVersion := moduleVersion(t, repo, "github.com/caddyserver/caddy/v2")

	dir := t.TempDir()
	goMod := "module caddy\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/caddyserver/caddy/v2 " + caddyVersion + "\n\tgithub.com/caddy-model-gateway/gateway v0.0.0\n)\n\n" +
		"replace github.com/caddy-model-gateway/gateway => " + repo + "\n"
	mainGo := `package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/caddy-model-gateway/gateway"
)

func main() {
	caddycmd.Main()
}
`
	writeFile(t, filepath.Join(dir, "go.mod"), goMod)
	writeFile(t, filepath.Join(dir, "main.go"), mainGo)
	// start from this module's checksums, as xcaddy starts from a fresh
	// go.sum and fills it from the module proxy
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))

	runIn(t, dir, "go", "mod", "tidy")
	bin := filepath.Join(dir, "caddy")
	// as xcaddy links by default (-ldflags "-w -s", without symbols and
	// DWARF): the link is most of this test's time, DWARF half of the link.
	// Not -trimpath, xcaddy's other default: it would compile every
	// package again rather than take this module's from the build cache.
	runIn(t, dir, "go", "build", "-ldflags", "-w -s", "-o", bin, ".")
	out := runIn(t, dir, bin, "list-modules")

	listed := strings.Fields(out)
	var want []string
	for _, id := range caddy.Modules() {
		if id == "gateway" || strings.HasPrefix(id, "gateway.") || strings.HasPrefix(id, "http.handlers.gateway_") {
			want = append(want, id)
		}
	}
	if !slices.Contains(want, "gateway") || !slices.Contains(want, "gateway.adapters.openai") {
		t.Fatalf("this test process registered no gateway modules: %v", want)
	}
	for _, id := range want {
		if !slices.Contains(listed, id) {
			t.Errorf("the plugin build does not list %s", id)
		}
	}
	t.Logf("plugin build lists %d gateway modules: %s", len(want), strings.Join(want, " "))
}

func moduleVersion(t *testing.T, repo, path string) string {
	t.Helper()
	v := strings.TrimSpace(runIn(t, repo, "go", "list", "-m", "-f", "{{.Version}}", path))
	if v == "" {
		t.Fatalf("no version of %s in go.mod", path)
	}
	return v
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
