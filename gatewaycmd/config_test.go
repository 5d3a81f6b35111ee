package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// A command's database is opened with its root user made on an empty one,
// the password printed once; the configuration's plan and group names,
// and the database's runtime plans, are known, nothing else.
func TestConfigDatabaseAndNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	var out bytes.Buffer
	st, err := OpenDatabase("sqlite", path, zap.NewNop(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UserByName(context.Background(), "root"); err != nil || out.Len() == 0 {
		t.Fatalf("root: %v, printed %q", err, out.String())
	}
	if err := st.PutRuntime(context.Background(), &store.RuntimeItem{Kind: store.RuntimePlan, Name: "made-at-runtime", Config: "{}"}, false); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out.Reset()
	if st, err = OpenDatabase("sqlite", path, zap.NewNop(), &out); err != nil || out.Len() != 0 {
		t.Fatalf("again: %v, printed %q", err, out.String())
	}
	st.Close()
	b := &ConfigBudgets{Plans: map[string]json.RawMessage{"pro": json.RawMessage("{}")}, Groups: map[string]json.RawMessage{"team": json.RawMessage("{}")}}
	known := b.Known("sqlite", path)
	for _, c := range []struct {
		kind, name string
		want       bool
	}{{"plan", "pro", true}, {"plan", "made-at-runtime", true}, {"plan", "team", false}, {"group", "team", true}, {"group", "pro", false}} {
		if got := known(c.kind, c.name); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.kind, c.name, got, c.want)
		}
	}
}
