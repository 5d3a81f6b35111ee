package gatewaycmd

import (
	"strings"
	"testing"
)

// TestAuditListRecordsTheCLI: changes made with the command line are in
// the audit log as the actor "cli", with no password in them, and the
// listing filters by action and pages.
func TestAuditListRecordsTheCLI(t *testing.T) {
	e := testEnv(t)
	if out := strings.TrimSpace(mustRun(t, e, "audit", "list")); out != "[]" {
		t.Fatalf("an empty audit log printed %q, want []", out)
	}
	mustRun(t, e, "user", "add", "--username", "ann", "--password", "password-ann-secret")
	mustRun(t, e, "user", "quota", "--username", "ann", "--add-usd", "2")
	mustRun(t, e, "user", "passwd", "--username", "ann", "--password", "another-secret-pw")
	mustRun(t, e, "redeem", "add", "--quota", "1000", "--count", "2", "--name", "spring-promo")
	out := mustRun(t, e, "audit", "list")
	for _, secret := range []string{"password-ann-secret", "another-secret-pw"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the audit log holds a password: %s", out)
		}
	}
	var entries []struct {
		Actor, Action, Target string
		CreatedAt             *string `json:"created_at"`
		Before, After         map[string]any
	}
	decode(t, e, &entries, "audit", "list")
	var actions []string
	for _, a := range entries {
		if a.Actor != "cli" || a.CreatedAt == nil || !rfc3339UTC.MatchString(*a.CreatedAt) {
			t.Fatalf("entry %+v", a)
		}
		actions = append(actions, a.Action)
	}
	if got := strings.Join(actions, ","); got != "code.create,user.password_reset,user.update,user.create" {
		t.Fatalf("actions %s", got)
	}
	if u := entries[2]; u.Before["quota"] != 0.0 || u.After["quota"] != 2_000_000.0 || u.Target != "user:1" {
		t.Fatalf("the quota change: %+v", u)
	}
	if c := entries[0]; c.Target != "batch:spring-promo" || c.After["count"] != 2.0 {
		t.Fatalf("the batch: %+v", c)
	}
	decode(t, e, &entries, "audit", "list", "--action", "user.")
	if len(entries) != 3 {
		t.Fatalf("user actions: %+v", entries)
	}
	decode(t, e, &entries, "audit", "list", "--limit", "1", "--before-id", "2")
	if len(entries) != 1 || entries[0].Action != "user.create" {
		t.Fatalf("a page before id 2: %+v", entries)
	}
	wantError(t, e, "--limit must be from 1", "audit", "list", "--limit", "0")
	wantError(t, e, "--since must be a positive duration", "audit", "list", "--since", "soon")
}

// TestRedeemBatches: codes made with a name are listed by it.
func TestRedeemBatches(t *testing.T) {
	e := testEnv(t)
	mustRun(t, e, "redeem", "add", "--quota", "1000", "--count", "3", "--name", "spring-promo")
	mustRun(t, e, "redeem", "add", "--quota", "5")
	var codes []struct {
		Name  string
		Quota int64
	}
	decode(t, e, &codes, "redeem", "list", "--name", "spring-promo")
	if len(codes) != 3 || codes[0].Name != "spring-promo" || codes[0].Quota != 1000 {
		t.Fatalf("the batch: %+v", codes)
	}
	decode(t, e, &codes, "redeem", "list", "--search", "SPRING")
	if len(codes) != 3 {
		t.Fatalf("searched: %+v", codes)
	}
	wantError(t, e, "at most 64 characters", "redeem", "add", "--quota", "1", "--name", strings.Repeat("n", 65))
}
