package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Missing binaries are an error that names the install step, and the
// newest of several installed versions is the one used.
func TestBinDir(t *testing.T) {
	root := t.TempDir()
	glob := filepath.Join(root, "*", "bin")
	if _, err := binDirIn(glob); err == nil || !strings.Contains(err.Error(), "make test-deps") {
		t.Fatalf("no binaries: %v, want an error naming make test-deps", err)
	}
	for _, v := range []string{"9", "15", "13"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := binDirIn(glob); err != nil || got != filepath.Join(root, "15", "bin") {
		t.Fatalf("binDir = %s, %v; want version 15's", got, err)
	}
}
