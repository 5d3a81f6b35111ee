package oidc_test

import (
	"context"
	"testing"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/oidctest"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestLinkedAccountsTakeTheSignIn: an account an administrator linked to
// an identity (by email before its first sign-in, by subject after) is
// the one that identity's sign-ins land in, whatever its name, and no
// account named by the email is made; unlinked, the sign-in is what it
// was (here refused: the email's name is a password account).
func TestLinkedAccountsTakeTheSignIn(t *testing.T) {
	ctx := context.Background()
	p, op, st := setup(t, oidctest.Identity{Subject: "sub-7", Email: "Grace@A.example", EmailVerified: true}, nil)
	admin := mustUser(t, st, "boss", store.RoleRoot)
	grace := mustUser(t, st, "grace", store.RoleUser)
	// a password account named by the email: without the link the sign-in is refused, not taken over
	mustUser(t, st, "grace@a.example", store.RoleUser)
	if _, err := signIn(t, p); reason(err) != "name_taken" {
		t.Fatalf("before the link: %v, want name_taken", err)
	}
	if _, err := account.LinkSSO(ctx, st, admin, grace.ID, p.Issuer(), "", "GRACE@a.example"); err != nil {
		t.Fatal(err)
	}
	u, err := signIn(t, p)
	if err != nil || u.ID != grace.ID {
		t.Fatalf("linked by email: %+v, %v, want user %d", u, err, grace.ID)
	}
	l, err := st.SSOLinkByUser(ctx, grace.ID)
	if err != nil || l.Subject != "sub-7" {
		t.Fatalf("the first sign-in did not fill the subject in: %+v, %v", l, err)
	}
	// the subject holds from now on, whatever email the provider sends
	op.SignIn(oidctest.Identity{Subject: "sub-7", Email: "grace.hopper@a.example", EmailVerified: true})
	if u, err := signIn(t, p); err != nil || u.ID != grace.ID {
		t.Fatalf("linked by subject: %+v, %v", u, err)
	}
	if n, _ := st.CountUsers(ctx); n != 3 {
		t.Fatalf("%d users: a linked sign-in made an account", n)
	}
	if err := account.UnlinkSSO(ctx, st, admin, grace.ID); err != nil {
		t.Fatal(err)
	}
	if u, err := signIn(t, p); err != nil || u.ID == grace.ID || u.Username != "grace.hopper@a.example" {
		t.Fatalf("after unlinking: %+v, %v, want a new account of the email", u, err)
	}
	// the audit log has both, as the administrator's
	entries, err := st.ListAudit(ctx, store.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Actor == "boss" {
			seen[e.Action] = true
		}
	}
	if !seen[account.AuditSSOLink] || !seen[account.AuditSSOUnlink] {
		t.Fatalf("audit actions %v", seen)
	}
}

func mustUser(t *testing.T, st store.Store, name, role string) *store.User {
	t.Helper()
	u, err := account.CreateUser(context.Background(), st, account.Operator,
		account.NewUser{Username: name, Password: "password-" + name, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
