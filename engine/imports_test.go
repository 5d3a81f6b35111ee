package engine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The engine and the body readers import no Caddy package and no
// caddymodule: they are the engine the Caddy layer calls, not part of it.
func TestNoCaddyImports(t *testing.T) {
	for _, dir := range []string{".", "../internal/bodies", "../routing", "../billing"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, "github.com/caddyserver/") || strings.HasSuffix(p, "/caddymodule") {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
