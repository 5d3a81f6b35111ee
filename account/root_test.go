package account_test

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestBootstrapRootOnce: an empty database gets a root user whose printed
// password logs in; a database with users is left alone and prints nothing.
func TestBootstrapRootOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	var out bytes.Buffer
	if err := account.BootstrapRoot(ctx, st, zap.NewNop(), &out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Username: root  Password: (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no password printed: %q", out.String())
	}
	u, err := account.NewGate(st, account.GateConfig{}).LogIn(ctx, "192.0.2.0/24", "root", m[1])
	if err != nil {
		t.Fatalf("logging in with the printed password: %v", err)
	}
	if u.Role != store.RoleRoot {
		t.Errorf("role %q, want %q", u.Role, store.RoleRoot)
	}

	out.Reset()
	if err := account.BootstrapRoot(ctx, st, zap.NewNop(), &out); err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountUsers(ctx); err != nil || n != 1 || out.Len() != 0 {
		t.Errorf("second bootstrap: %d users (%v), printed %q; want 1 and nothing", n, err, out.String())
	}
}
