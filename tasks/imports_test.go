package tasks

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCaddyImports: the engine is Caddy-free. The walk stops at the
// adapters package, whose Caddyfile helpers (adapters/module.go) are the
// adapters' own to move; once they have, the exception can go.
func TestNoCaddyImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	const self, skip = "github.com/caddy-model-gateway/gateway/tasks", "github.com/caddy-model-gateway/gateway/adapters"
	seen := map[string]string{self: ""}
	queue := []string{self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, ok := seen[q]; ok || q == skip {
				continue
			}
			seen[q] = p
			if strings.Contains(q, "caddyserver") {
				t.Errorf("%s imports %s", p, q)
			}
			queue = append(queue, q)
		}
	}
}
