package account_test

import (
	"context"
	"testing"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestResetPasswordWhoMay: administrators reset users' passwords, only
// root an administrator's; nobody resets root's or their own; a reset
// ends the user's sessions and the new password logs in.
func TestResetPasswordWhoMay(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := mustCreate(t, st, "root", store.RoleRoot, 0)
	admin := mustCreate(t, st, "adm", store.RoleAdmin, 0)
	other := mustCreate(t, st, "adm2", store.RoleAdmin, 0)
	user := mustCreate(t, st, "usr", store.RoleUser, 0)
	for _, c := range []struct {
		actor, target *store.User
		want          string
	}{
		{admin, user, ""},
		{admin, other, "not_allowed"},
		{admin, root, "not_allowed"},
		{admin, admin, "not_allowed"},
		{root, other, ""},
		{root, root, "not_allowed"},
		{user, user, "not_allowed"},
		{account.Operator, root, ""},
	} {
		err := account.ResetPassword(ctx, st, c.actor, c.target.ID, "a-new-password")
		if code(err) != c.want || (c.want == "" && err != nil) {
			t.Errorf("%s resetting %s: %v, want %q", c.actor.Username, c.target.Username, err, c.want)
		}
	}
	if err := account.ResetPassword(ctx, st, admin, user.ID, "short"); code(err) != "invalid_request" {
		t.Fatalf("a short password: %v", err)
	}

	sessions := account.Sessions{Store: st}
	id, err := sessions.Start(ctx, user.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := account.ResetPassword(ctx, st, admin, user.ID, "reset-by-admin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessions.User(ctx, id); err == nil {
		t.Fatal("the user's session outlived the reset")
	}
	g := account.NewGate(st, account.GateConfig{})
	if _, err := g.LogIn(ctx, "192.0.2.1", "usr", "reset-by-admin"); err != nil {
		t.Fatalf("the new password does not log in: %v", err)
	}
}
