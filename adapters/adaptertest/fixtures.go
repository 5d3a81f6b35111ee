package adaptertest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// What the role kits (tasks, rerank, azure) share: fixtures read from a
// directory, each checked against the golden beside it, and goldens that no
// fixture checked refused.

// eachFixture runs fn as a subtest for every NAME.json in dir, with the
// file's bytes and the path of NAME.golden, which it marks checked.
func eachFixture(t *testing.T, dir string, checked map[string]bool, fn func(t *testing.T, raw []byte, golden string)) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			golden := strings.TrimSuffix(path, ".json") + ".golden"
			checked[golden] = true
			fn(t, goldentest.Read(t, path), golden)
		})
	}
}

// uncheckedGoldens fails for each golden in dirs that no fixture checked:
// a fixture removed leaves no stale golden behind.
func uncheckedGoldens(t *testing.T, checked map[string]bool, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		goldens, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
		for _, g := range goldens {
			if !checked[g] {
				t.Errorf("%s: no fixture checks this golden (remove it, or restore its .json)", g)
			}
		}
	}
}

// fixtureCount is how many fixtures dir holds.
func fixtureCount(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return len(files)
}
