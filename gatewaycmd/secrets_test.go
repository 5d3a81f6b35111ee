package gatewaycmd

import (
	"context"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestSecretsRotate: every sealed key is re-sealed under the new key, and
// a wrong old key (or one row it does not open) changes nothing; the
// rotation is audited as the CLI's, with no key in it.
func TestSecretsRotate(t *testing.T) {
	e := testEnv(t)
	const oldKey, newKey, otherKey = "old-secrets-key-0123456789", "new-secrets-key-0123456789", "other-secrets-key-012345"
	old, _ := sealed.NewKey(oldKey)
	st, err := e.OpenStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, n := range []string{"east", "west"} {
		it := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: n, Config: `{}`}
		if it.Secret, err = old.Seal([]byte(`["sk-`+n+`"]`), it.Binding()); err != nil {
			t.Fatal(err)
		}
		if err := st.PutRuntime(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, e, "does not open the keys of channel", "secrets", "rotate", "--old", otherKey, "--new", newKey)
	wantError(t, e, "at least 16", "secrets", "rotate", "--old", "short", "--new", newKey)
	if out := mustRun(t, e, "secrets", "rotate", "--old", oldKey, "--new", newKey); out != "{\n  \"resealed\": 2\n}\n" {
		t.Fatalf("rotate printed %q", out)
	}
	next, _ := sealed.NewKey(newKey)
	items, err := st.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil || len(items) != 2 {
		t.Fatal(items, err)
	}
	for _, it := range items {
		plain, err := next.Open(it.Secret, it.Binding())
		if err != nil || string(plain) != `["sk-`+it.Name+`"]` {
			t.Fatalf("%s under the new key: %q %v", it.Name, plain, err)
		}
		if _, err := old.Open(it.Secret, it.Binding()); err == nil {
			t.Fatalf("%s still opens under the old key", it.Name)
		}
	}
	audit, err := st.ListAudit(ctx, store.AuditFilter{Action: AuditSecretsRotate})
	if err != nil || len(audit) != 1 || audit[0].Actor != "cli" || string(audit[0].After) != `{"resealed":2}` {
		t.Fatalf("audited %+v %v", audit, err)
	}
}
