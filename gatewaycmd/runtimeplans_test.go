package gatewaycmd

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// A plan made at runtime is known by its name while enabled; a database
// that cannot be opened knows none.
func TestRuntimePlanKnown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.db")
	st, err := store.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, it := range []*store.RuntimeItem{
		{Kind: store.RuntimePlan, Name: "pro", Config: "{}"},
		{Kind: store.RuntimePlan, Name: "old", Config: "{}", Disabled: true},
		{Kind: store.RuntimeChannel, Name: "chan", Config: "{}"},
	} {
		if err := st.PutRuntime(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for name, want := range map[string]bool{"pro": true, "old": false, "chan": false, "none": false} {
		if got := RuntimePlanKnown("sqlite", path, name); got != want {
			t.Errorf("%s: known = %v, want %v", name, got, want)
		}
	}
	if RuntimePlanKnown("nodriver", path, "pro") {
		t.Error("a database that cannot be opened knows a plan")
	}
}
