package gatewaycmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestSignInCommands: the operator's reset link is printed once as the
// reset page's address (the database keeps its hash), an SSO link names
// the user, and a lost phone's factors are cleared; each audited as cli.
func TestSignInCommands(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann")
	var link struct {
		Username, URL string
	}
	if err := json.Unmarshal([]byte(mustRun(t, e, "user", "reset-link", "--username", "ann", "--ttl", "10m", "--base-url", "https://gw.example/")), &link); err != nil {
		t.Fatal(err)
	}
	token, ok := strings.CutPrefix(link.URL, "https://gw.example/console/reset#")
	if !ok || link.Username != "ann" || len(token) < 40 {
		t.Fatalf("reset link %+v", link)
	}
	if _, err := run(t, e, "user", "reset-link", "--username", "ann", "--ttl", "720h"); err == nil || !strings.Contains(err.Error(), "168h") {
		t.Fatalf("a month-long link: %v", err)
	}
	if _, err := run(t, e, "user", "sso-link", "--username", "ann", "--issuer", "https://id.example"); err == nil {
		t.Fatal("a link with neither subject nor email")
	}
	out := mustRun(t, e, "user", "sso-link", "--username", "ann", "--issuer", "https://id.example", "--email", "Ann@Corp.example")
	if !strings.Contains(out, `"email": "ann@corp.example"`) {
		t.Fatalf("sso-link printed %s", out)
	}

	st, err := e.OpenStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, _ := st.UserByName(ctx, "ann")
	gate := account.NewGate(st, account.GateConfig{})
	if _, err := gate.UseResetLink(ctx, "192.0.2.1", token, "anns-new-password"); err != nil {
		t.Fatalf("the printed link: %v", err)
	}
	enr, err := gate.BeginTOTP(ctx, u, "gw")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := totp.GenerateCode(enr.Secret, time.Now())
	if _, err := gate.ConfirmTOTP(ctx, u, c); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e, "user", "second-factor-reset", "--username", "ann")
	if f, _ := account.FactorsOf(ctx, st, u.ID); f.Any() || f.RecoveryCodes != 0 {
		t.Fatalf("factors after the reset: %+v", f)
	}
	mustRun(t, e, "user", "sso-unlink", "--username", "ann")
	if _, err := run(t, e, "user", "sso-unlink", "--username", "ann"); err == nil {
		t.Fatal("unlinked twice")
	}
	entries, err := st.ListAudit(ctx, store.AuditFilter{Actor: "cli", Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Action] = true
	}
	for _, a := range []string{account.AuditResetLink, account.AuditSSOLink, account.AuditSSOUnlink, account.AuditFactorsReset} {
		if !seen[a] {
			t.Errorf("no %s by cli in the audit log: %v", a, seen)
		}
	}
}
