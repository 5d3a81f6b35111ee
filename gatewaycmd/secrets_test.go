package gatewaycmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestSecretsRotate: every sealed key and two-factor secret is re-sealed
// under the new key (a two-factor secret kept plain, from before
// secrets_key, is sealed), and a wrong old key (or one row it does not
// open) changes nothing; the rotation is audited as the CLI's, with no key
// in it.
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
	// two-factor secrets: one enrolled under the old key, one before any
	enrolled := map[string]string{}
	for name, key := range map[string]account.SecretSealer{"sealed-totp": old, "plain-totp": nil} {
		u := &store.User{Username: name, Role: store.RoleUser}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		enr, err := account.NewGate(st, account.GateConfig{SecretsKey: key}).BeginTOTP(ctx, u, "gw")
		if err != nil {
			t.Fatal(err)
		}
		enrolled[name] = enr.Secret
		kept, err := st.TOTPByUser(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sealedKept := kept.Secret != enr.Secret; sealedKept != (key != nil) || key != nil && strings.Contains(kept.Secret, enr.Secret) {
			t.Fatalf("%s: the store keeps %q for the secret %q", name, kept.Secret, enr.Secret)
		}
	}
	wantError(t, e, "does not open the keys of channel", "secrets", "rotate", "--old", otherKey, "--new", newKey)
	wantError(t, e, "at least 16", "secrets", "rotate", "--old", "short", "--new", newKey)
	if out := mustRun(t, e, "secrets", "rotate", "--old", oldKey, "--new", newKey); out != "{\n  \"resealed\": 2,\n  \"totp_resealed\": 2\n}\n" {
		t.Fatalf("rotate printed %q", out)
	}
	next, _ := sealed.NewKey(newKey)
	// both secrets now open under the new key only: a code from each
	// person's app confirms the enrolment with it, not without it
	for name, secret := range enrolled {
		u, err := st.UserByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		code, _ := totp.GenerateCode(secret, time.Now())
		kept, _ := st.TOTPByUser(ctx, u.ID)
		if strings.Contains(kept.Secret, secret) {
			t.Fatalf("%s: the store keeps the secret readable: %q", name, kept.Secret)
		}
		if _, err := account.NewGate(st, account.GateConfig{SecretsKey: old}).ConfirmTOTP(ctx, u, code); err == nil {
			t.Fatalf("%s: the old key still opens the secret", name)
		}
		if _, err := account.NewGate(st, account.GateConfig{}).ConfirmTOTP(ctx, u, code); err == nil || !strings.Contains(err.Error(), "sets none") {
			t.Fatalf("%s: without a key: %v", name, err)
		}
		if _, err := account.NewGate(st, account.GateConfig{SecretsKey: next}).ConfirmTOTP(ctx, u, code); err != nil {
			t.Fatalf("%s: under the new key: %v", name, err)
		}
	}
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
	if err != nil || len(audit) != 1 || audit[0].Actor != "cli" || string(audit[0].After) != `{"resealed":2,"totp_resealed":2}` {
		t.Fatalf("audited %+v %v", audit, err)
	}
}
