package account_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/store"
)

// TestResetLinks: an administrator's link sets the password once and ends
// the user's sessions; a too-short password does not spend it; a newer
// link replaces it; who may issue one is who may reset a password; both
// the issue and the use are audited, neither with the secret.
func TestResetLinks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := mustCreate(t, st, "root", store.RoleRoot, 0)
	admin := mustCreate(t, st, "adm", store.RoleAdmin, 0)
	user := mustCreate(t, st, "usr", store.RoleUser, 0)
	gate := account.NewGate(st, account.GateConfig{Attempts: 100})
	if _, err := account.IssueResetLink(ctx, st, admin, root.ID, 0); code(err) != "not_allowed" {
		t.Fatalf("an admin's link for root: %v", err)
	}
	if _, err := account.IssueResetLink(ctx, st, admin, user.ID, 30*24*time.Hour); code(err) != "invalid_ttl" {
		t.Fatalf("a month-long link: %v", err)
	}
	first, err := account.IssueResetLink(ctx, st, admin, user.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(first.ExpiresAt); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("the default link lasts %s, want an hour", d)
	}
	link, err := account.IssueResetLink(ctx, st, admin, user.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gate.ResetLinkUser(ctx, "192.0.2.1", first.Token); !errors.Is(err, account.ErrResetLinkInvalid) {
		t.Fatalf("the replaced link: %v", err)
	}
	if u, _, err := gate.ResetLinkUser(ctx, "192.0.2.1", link.Token); err != nil || u.ID != user.ID {
		t.Fatalf("check: %+v, %v", u, err)
	}
	sessions := account.Sessions{Store: st}
	sid, err := sessions.Start(ctx, user.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gate.UseResetLink(ctx, "192.0.2.1", link.Token, "short"); code(err) != "invalid_request" {
		t.Fatalf("a short password: %v", err)
	}
	if _, err := gate.UseResetLink(ctx, "192.0.2.1", link.Token, "a-new-password"); err != nil {
		t.Fatalf("the link after a refused password: %v", err)
	}
	if _, _, err := sessions.User(ctx, sid); !errors.Is(err, account.ErrSessionExpired) {
		t.Fatalf("the session before the reset: %v", err)
	}
	if _, err := gate.LogIn(ctx, "192.0.2.1", "usr", "a-new-password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	if _, err := gate.UseResetLink(ctx, "192.0.2.1", link.Token, "another-password"); !errors.Is(err, account.ErrResetLinkInvalid) {
		t.Fatalf("the link used twice: %v", err)
	}
	entries, err := st.ListAudit(ctx, store.AuditFilter{Target: account.UserTarget(user.ID), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var issued, used int
	for _, e := range entries {
		switch e.Action {
		case account.AuditResetLink:
			issued++
			if e.Actor != "adm" {
				t.Errorf("issued by %q", e.Actor)
			}
		case account.AuditResetLinkUsed:
			used++
			if e.Actor != "usr" {
				t.Errorf("used by %q", e.Actor)
			}
		}
		if s := string(e.Before) + string(e.After); strings.Contains(s, first.Token) || strings.Contains(s, link.Token) {
			t.Errorf("the audit log holds a link's secret: %s", s)
		}
	}
	if issued != 2 || used != 1 {
		t.Fatalf("audit: %d issued, %d used", issued, used)
	}
	if _, err := account.IssueResetLink(ctx, st, root, admin.ID, time.Minute); err != nil {
		t.Fatalf("root's link for an admin: %v", err)
	}
}

// TestTOTPSecondStep: enrolment waits for a right code and gives recovery
// codes; a password login then needs the second step; a wrong code is
// refused and counted; a code is good once; a recovery code once;
// turning it off needs proof.
func TestTOTPSecondStep(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	u := mustCreate(t, st, "tess", store.RoleUser, 0)
	gate := account.NewGate(st, account.GateConfig{Attempts: 5, Window: time.Hour})
	if p, err := gate.StartSecondStep(ctx, u); err != nil || p != nil {
		t.Fatalf("no factor yet: %+v, %v", p, err)
	}
	enr, err := gate.BeginTOTP(ctx, u, "Test Gateway")
	if err != nil {
		t.Fatal(err)
	}
	if enr.Secret == "" || enr.QR == "" || !strings.HasPrefix(enr.URI, "otpauth://totp/Test%20Gateway:tess?") {
		t.Fatalf("enrolment %+v", enr)
	}
	if f, _ := account.FactorsOf(ctx, st, u.ID); f.Any() {
		t.Fatal("an unconfirmed secret counts as a factor")
	}
	if _, err := gate.ConfirmTOTP(ctx, u, "000000"); code(err) != "invalid_code" {
		t.Fatalf("a wrong first code: %v", err)
	}
	now := time.Now()
	first, _ := totp.GenerateCode(enr.Secret, now)
	codes, err := gate.ConfirmTOTP(ctx, u, first)
	if err != nil || len(codes) != 10 {
		t.Fatalf("confirm: %v, %v", codes, err)
	}
	if _, err := gate.BeginTOTP(ctx, u, "x"); code(err) != "totp_enabled" {
		t.Fatalf("enrolling over a confirmed secret: %v", err)
	}
	p, err := gate.StartSecondStep(ctx, u)
	if err != nil || p == nil || p.Token == "" || len(p.Methods) != 2 {
		t.Fatalf("second step: %+v, %v", p, err)
	}
	// the code that confirmed is spent
	if _, err := gate.SecondStep(ctx, "192.0.2.9", p.Token, first); !errors.Is(err, account.ErrBadSecondFactor) {
		t.Fatalf("the confirming code again: %v", err)
	}
	if _, err := gate.SecondStep(ctx, "192.0.2.9", p.Token, "123456x"); !errors.Is(err, account.ErrBadSecondFactor) {
		t.Fatalf("a wrong code: %v", err)
	}
	next, _ := totp.GenerateCode(enr.Secret, now.Add(30*time.Second))
	got, err := gate.SecondStep(ctx, "192.0.2.9", p.Token, next)
	if err != nil || got.ID != u.ID {
		t.Fatalf("the next step's code: %+v, %v", got, err)
	}
	if _, err := gate.SecondStep(ctx, "192.0.2.9", p.Token, next); !errors.Is(err, account.ErrLoginExpired) {
		t.Fatalf("a finished pending login again: %v", err)
	}
	// a recovery code, dashes and case aside, once
	p2, _ := gate.StartSecondStep(ctx, u)
	if _, err := gate.SecondStep(ctx, "192.0.2.10", p2.Token, " "+strings.ToUpper(codes[3])+" "); err != nil {
		t.Fatalf("a recovery code: %v", err)
	}
	p3, _ := gate.StartSecondStep(ctx, u)
	if _, err := gate.SecondStep(ctx, "192.0.2.10", p3.Token, codes[3]); !errors.Is(err, account.ErrBadSecondFactor) {
		t.Fatalf("a recovery code twice: %v", err)
	}
	// the user's attempts are limited (5 an hour here: 4 so far)
	var refused error
	for range 3 {
		if _, refused = gate.SecondStep(ctx, "192.0.2.11", p3.Token, "999999"); code(refused) == "rate_limited" {
			break
		}
	}
	if code(refused) != "rate_limited" {
		t.Fatalf("guessing codes: %v, want rate_limited", refused)
	}
	if f, _ := account.FactorsOf(ctx, st, u.ID); !f.TOTP || f.RecoveryCodes != 9 {
		t.Fatalf("factors %+v", f)
	}
	gate2 := account.NewGate(st, account.GateConfig{})
	if err := gate2.DisableTOTP(ctx, "192.0.2.12", u, "", "wrong-password"); code(err) != "invalid_password" {
		t.Fatalf("disable with a wrong password: %v", err)
	}
	if err := gate2.DisableTOTP(ctx, "192.0.2.12", u, "", "password-tess"); err != nil {
		t.Fatal(err)
	}
	if f, _ := account.FactorsOf(ctx, st, u.ID); f.Any() || f.RecoveryCodes != 0 {
		t.Fatalf("after disable: %+v", f)
	}
}

// TestTOTPSealedSecretWithoutItsKey: a secret enrolled with a secrets_key
// is checked with it; a gateway configured without it cannot check a code
// and says why, while a recovery code still proves the person.
func TestTOTPSealedSecretWithoutItsKey(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	u := mustCreate(t, st, "sealy", store.RoleUser, 0)
	key, _ := sealed.NewKey("sealed-secret-test-key-0123")
	withKey := account.NewGate(st, account.GateConfig{SecretsKey: key})
	enr, err := withKey.BeginTOTP(ctx, u, "gw")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := totp.GenerateCode(enr.Secret, time.Now())
	codes, err := withKey.ConfirmTOTP(ctx, u, first)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := totp.GenerateCode(enr.Secret, time.Now().Add(30*time.Second))
	without := account.NewGate(st, account.GateConfig{})
	if _, err := without.NewRecoveryCodes(ctx, "192.0.2.7", u, next, ""); !errors.Is(err, account.ErrTOTPSealedNoKey) {
		t.Fatalf("a code with no key to check it: %v, want ErrTOTPSealedNoKey", err)
	}
	if _, err := without.NewRecoveryCodes(ctx, "192.0.2.7", u, codes[0], ""); err != nil {
		t.Fatalf("a recovery code with no key: %v", err)
	}
	if _, err := withKey.NewRecoveryCodes(ctx, "192.0.2.7", u, next, ""); err != nil {
		t.Fatalf("the code with the key: %v", err)
	}
}
