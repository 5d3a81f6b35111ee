package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/internal/oidctest"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Sign-in beyond a password, end to end: an administrator's one-time
// reset link (single use, short-lived, hashed at rest, ending the user's
// sessions), TOTP as a login's second step with recovery codes and the
// password's attempt limits, SSO links an SSO sign-in lands in, and
// require_second_factor admins.

type resetLinkAnswer struct {
	URL       string    `json:"url"`
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expires_at"`
}

// linkToken is the secret in a reset link's fragment.
func linkToken(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Path != "/console/reset" || len(u.Fragment) < 40 || u.RawQuery != "" {
		t.Fatalf("reset link %q: want /console/reset#<secret>", link)
	}
	return u.Fragment
}

func TestResetLinkOnceExpiresAndEndsSessions(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	admin := loggedIn(t, g, "ops", 0, "admin")
	createUser(g, "bob", 0, "user")
	laptop, phone := newClient(t, g), newClient(t, g)
	laptop.login("bob")
	phone.login("bob")
	bob := g.User("bob")

	var link resetLinkAnswer
	admin.ok(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/reset_link", bob.ID), map[string]string{}).decode(t, &link)
	token := linkToken(t, link.URL)
	if !strings.HasPrefix(link.URL, g.URL+"/console/reset#") || time.Until(link.ExpiresAt) > time.Hour || time.Until(link.ExpiresAt) < 50*time.Minute {
		t.Fatalf("link %+v: want the gateway's /console/reset, lasting the default hour", link)
	}
	// the database keeps the hash alone
	if _, err := g.Store().Challenge(context.Background(), store.ChallengeReset, token); err == nil {
		t.Fatal("the link's secret is stored as it is")
	}
	if _, err := g.Store().Challenge(context.Background(), store.ChallengeReset, keys.Hash(token)); err != nil {
		t.Fatalf("the link is not stored by its hash: %v", err)
	}
	// the page greets the user; a too-short password does not spend the link
	anon := newClient(t, g)
	var who struct{ Username string }
	anon.ok(http.MethodPost, "/api/user/reset_link/check", map[string]string{"token": token}).decode(t, &who)
	if who.Username != "bob" {
		t.Fatalf("the link is for %q", who.Username)
	}
	anon.do(http.MethodPost, "/api/user/reset_link", map[string]string{"token": token, "password": "short"}).apiErr(t, 400, "")
	anon.ok(http.MethodPost, "/api/user/reset_link", map[string]string{"token": token, "password": "bobs-new-password"})
	// every session of bob's ended; the new password works, the old does not
	laptop.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	phone.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "bob", "password": "password-bob"}).apiErr(t, 401, "invalid_credentials")
	newClient(t, g).ok(http.MethodPost, "/api/user/login", map[string]string{"username": "bob", "password": "bobs-new-password"})
	// single use
	anon.do(http.MethodPost, "/api/user/reset_link", map[string]string{"token": token, "password": "another-password"}).apiErr(t, 400, "reset_link_invalid")
	anon.do(http.MethodPost, "/api/user/reset_link/check", map[string]string{"token": token}).apiErr(t, 400, "reset_link_invalid")

	// from the CLI, short-lived: once its second has passed it is refused
	var cli struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(g.CLI("user", "reset-link", "--username", "bob", "--ttl", "1s", "--base-url", g.URL)), &cli); err != nil {
		t.Fatal(err)
	}
	short := linkToken(t, cli.URL)
	eventually(t, "the one-second link expires", func() bool {
		return anon.do(http.MethodPost, "/api/user/reset_link/check", map[string]string{"token": short}).status == 400
	})
	anon.do(http.MethodPost, "/api/user/reset_link", map[string]string{"token": short, "password": "late-password"}).apiErr(t, 400, "reset_link_invalid")
	newClient(t, g).ok(http.MethodPost, "/api/user/login", map[string]string{"username": "bob", "password": "bobs-new-password"})

	// who may: a user may not, an administrator may not for another administrator
	bobClient := newClient(t, g)
	bobClient.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "bob", "password": "bobs-new-password"})
	bobClient.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/reset_link", bob.ID), map[string]string{}).apiErr(t, 403, "admin_only")
	createUser(g, "ops2", 0, "admin")
	admin.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/reset_link", g.User("ops2").ID), map[string]string{}).apiErr(t, 403, "not_allowed")

	// audited, without the secret
	entries, err := g.Store().ListAudit(context.Background(), store.AuditFilter{Target: fmt.Sprintf("user:%d", bob.ID), Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, e := range entries {
		actions[e.Action+" by "+e.Actor] = string(e.After)
		if strings.Contains(string(e.Before)+string(e.After), token) || strings.Contains(string(e.Before)+string(e.After), short) {
			t.Fatalf("the audit log holds a link's secret: %+v", e)
		}
	}
	for _, want := range []string{"user.reset_link by ops", "user.reset_link by cli", "user.reset_link_used by bob"} {
		if _, ok := actions[want]; !ok {
			t.Errorf("the audit log lacks %q: %v", want, actions)
		}
	}
	for _, s := range []string{token, short} {
		if strings.Contains(g.Logs(), s) {
			t.Fatal("a reset link's secret is in the logs")
		}
	}
}

// totpCode is the authenticator's code at now+offset steps.
func totpCode(t *testing.T, secret string, steps int) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, time.Now().Add(time.Duration(steps)*30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type secondStep struct {
	Required bool     `json:"second_factor_required"`
	Token    string   `json:"login_token"`
	Methods  []string `json:"methods"`
}

// passwordStep logs in with a password and expects a second step.
func passwordStep(t *testing.T, c *client, name, password string) secondStep {
	t.Helper()
	a := c.ok(http.MethodPost, "/api/user/login", map[string]string{"username": name, "password": password})
	var s secondStep
	a.decode(t, &s)
	if !s.Required || s.Token == "" || len(a.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a login of a user with TOTP: %s, cookies %v", a.body, a.header.Values("Set-Cookie"))
	}
	return s
}

func TestTOTPLoginNeedsACode(t *testing.T) {
	g := startAccounts(t, "off", 12)
	tess := loggedIn(t, g, "tess", 0, "user")
	var enr struct{ Secret, URI, QR string }
	tess.ok(http.MethodPost, "/api/user/totp", map[string]string{}).decode(t, &enr)
	if enr.Secret == "" || !strings.HasPrefix(enr.URI, "otpauth://totp/") || !strings.HasPrefix(enr.QR, "data:image/png;base64,") {
		t.Fatalf("enrolment %+v", enr)
	}
	tess.do(http.MethodPost, "/api/user/totp/confirm", map[string]string{"code": "000000"}).apiErr(t, 400, "invalid_code")
	var rec struct {
		Codes []string `json:"recovery_codes"`
	}
	tess.ok(http.MethodPost, "/api/user/totp/confirm", map[string]string{"code": totpCode(t, enr.Secret, 0)}).decode(t, &rec)
	if len(rec.Codes) != 10 {
		t.Fatalf("recovery codes %v", rec.Codes)
	}
	// the recovery codes are hashed at rest: a code is not a stored value
	if n, _ := g.Store().CountRecoveryCodes(context.Background(), g.User("tess").ID); n != 10 {
		t.Fatalf("%d recovery codes stored", n)
	}

	// a password login now answers with a second step and no session
	c := newClient(t, g)
	s := passwordStep(t, c, "tess", "password-tess")
	if strings.Join(s.Methods, ",") != "totp,recovery_code" {
		t.Fatalf("methods %v", s.Methods)
	}
	c.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "not_logged_in")
	// a wrong code is refused; the confirming code was spent
	c.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s.Token, "code": "123456"}).apiErr(t, 401, "invalid_second_factor")
	c.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s.Token, "code": totpCode(t, enr.Secret, 0)}).apiErr(t, 401, "invalid_second_factor")
	next := totpCode(t, enr.Secret, 1)
	c.ok(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s.Token, "code": next})
	if c.self().Username != "tess" {
		t.Fatal("no session after the second step")
	}
	// the pending login and the code are good once
	c.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s.Token, "code": next}).apiErr(t, 400, "login_expired")

	// a recovery code, once
	c2 := newClient(t, g)
	s2 := passwordStep(t, c2, "tess", "password-tess")
	c2.ok(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s2.Token, "code": rec.Codes[0]})
	c3 := newClient(t, g)
	s3 := passwordStep(t, c3, "tess", "password-tess")
	c3.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s3.Token, "code": rec.Codes[0]}).apiErr(t, 401, "invalid_second_factor")
	if n, _ := g.Store().CountRecoveryCodes(context.Background(), g.User("tess").ID); n != 9 {
		t.Fatalf("%d recovery codes left, want 9", n)
	}

	// turning it off needs a code or the password
	tess.do(http.MethodPost, "/api/user/totp/disable", map[string]string{}).apiErr(t, 400, "invalid_request")
	tess.do(http.MethodPost, "/api/user/totp/disable", map[string]string{"password": "not-it"}).apiErr(t, 400, "invalid_password")

	// wrong codes count as wrong passwords do: the user is refused with 429
	// (12 a minute here, enrolment included), even from another address,
	// even the right code
	var last apiAnswer
	for i := range 8 {
		c3.from = fmt.Sprintf("198.51.100.%d", i+1)
		if last = c3.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s3.Token, "code": "654321"}); last.status == 429 {
			break
		}
	}
	last.apiErr(t, 429, "rate_limited")
	if last.header.Get("Retry-After") == "" {
		t.Fatal("a refused second step without Retry-After")
	}
	c3.from = "198.51.100.99"
	c3.do(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": s3.Token, "code": totpCode(t, enr.Secret, 0)}).apiErr(t, 429, "rate_limited")

}

// TestTOTPSecretSealedAtRest: with a secrets_key, a person's TOTP secret
// is kept sealed (not in the database in clear, on SQLite not in its
// file), the codes of their app still sign them in, the rotation command
// re-seals it with the channels' keys, and with the configuration
// following the rotation they sign in with the next code. (Confirming the
// enrolment opened the secret under the old key; a code is good once and
// only the next step's is left in this window, so one sign-in it is.)
func TestTOTPSecretSealedAtRest(t *testing.T) {
	oldKey := secretsKeyFile(t, "old.key")
	newKey := secretsKeyFile(t, "new.key")
	g := gatewaytest.Start(t, runtimeConfig(oldKey).String(), nil)
	tess := loggedIn(t, g, "tess", 0, "user")
	var enr struct{ Secret string }
	tess.ok(http.MethodPost, "/api/user/totp", map[string]string{}).decode(t, &enr)
	tess.ok(http.MethodPost, "/api/user/totp/confirm", map[string]string{"code": totpCode(t, enr.Secret, 0)})
	kept, err := g.Store().TOTPByUser(context.Background(), g.User("tess").ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(kept.Secret, "sealed:") || strings.Contains(kept.Secret, enr.Secret) {
		t.Fatalf("the store keeps %q for the secret %q", kept.Secret, enr.Secret)
	}
	if g.DBPath != "" {
		for _, f := range []string{g.DBPath, g.DBPath + "-wal"} {
			raw, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte(enr.Secret)) {
				t.Fatalf("%s holds the TOTP secret in clear", f)
			}
		}
	}
	if out := g.CLI("secrets", "rotate", "--old", "{file."+oldKey+"}", "--new", "{file."+newKey+"}"); !strings.Contains(out, `"totp_resealed": 1`) {
		t.Fatalf("rotate printed %s", out)
	}
	if again, _ := g.Store().TOTPByUser(context.Background(), g.User("tess").ID); again.Secret == kept.Secret || !strings.HasPrefix(again.Secret, "sealed:") {
		t.Fatalf("after the rotation the store keeps %q (before %q)", again.Secret, kept.Secret)
	}
	g.Reload(runtimeConfig(newKey).String(), nil)
	c := newClient(t, g)
	step := passwordStep(t, c, "tess", "password-tess")
	c.ok(http.MethodPost, "/api/user/login/second_factor", map[string]string{"login_token": step.Token, "code": totpCode(t, enr.Secret, 1)})
	if c.self().Username != "tess" {
		t.Fatal("no session after the second step")
	}
}

// ssoAdminsConfig signs in through issuer and requires administrators'
// password sessions to have a second factor.
func ssoAdminsConfig(issuer string) *caddyfile {
	return ssoConfig(issuer).option("require_second_factor admins")
}

// ssoSignIn follows a single sign-on from the gateway to the provider and
// back, as a browser does, and returns the client, signed in.
func ssoSignIn(t *testing.T, g *gatewaytest.Gateway) *client {
	t.Helper()
	c := newClient(t, g)
	resp, err := c.http.Get(g.URL + "/api/user/oidc/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/" || resp.Request.URL.RawQuery != "" {
		t.Fatalf("the sign-in ended at %s", resp.Request.URL)
	}
	return c
}

func TestSSOLinkAndRequiredSecondFactor(t *testing.T) {
	const secret = "oidc-client-secret-7d1e0b42"
	gatewaytest.Secret(secret)
	t.Setenv(ssoSecretEnv, secret)
	op := oidctest.Start(t, "gateway-console", secret, oidctest.Identity{Subject: "carol-sub", Email: "Carol@A.example", EmailVerified: true})
	g := gatewaytest.Start(t, ssoAdminsConfig(op.URL).String(), nil)

	// an administrator who signs in with a password is sent to enrol first
	admin := loggedIn(t, g, "ops", 0, "admin")
	admin.do(http.MethodGet, "/api/admin/users", nil).apiErr(t, 403, "second_factor_required")
	var f struct {
		Required bool `json:"required"`
		TOTP     bool `json:"totp"`
	}
	admin.ok(http.MethodGet, "/api/user/second_factor", nil).decode(t, &f)
	if !f.Required || f.TOTP {
		t.Fatalf("second factors %+v", f)
	}
	var enr struct{ Secret string }
	admin.ok(http.MethodPost, "/api/user/totp", map[string]string{}).decode(t, &enr)
	admin.ok(http.MethodPost, "/api/user/totp/confirm", map[string]string{"code": totpCode(t, enr.Secret, 0)})
	admin.ok(http.MethodGet, "/api/admin/users", nil)
	// users are not asked
	loggedIn(t, g, "plain", 0, "user").ok(http.MethodGet, "/api/user/tokens", nil)

	// an existing password account, linked to the provider's email
	createUser(g, "carol", 0, "user")
	carol := g.User("carol")
	var l struct {
		Issuer, Subject, Email string
	}
	admin.ok(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/sso_link", carol.ID), map[string]string{"email": "carol@a.example"}).decode(t, &l)
	if l.Issuer != op.URL || l.Email != "carol@a.example" || l.Subject != "" {
		t.Fatalf("link %+v", l)
	}
	before, _ := g.Store().CountUsers(context.Background())
	c := ssoSignIn(t, g)
	if who := c.self(); who.Username != "carol" || who.ID != carol.ID {
		t.Fatalf("the linked sign-in landed in %+v, want carol (%d)", who, carol.ID)
	}
	if after, _ := g.Store().CountUsers(context.Background()); after != before {
		t.Fatalf("a linked sign-in made an account: %d users, were %d", after, before)
	}
	var view struct {
		SSOLink struct{ Subject string } `json:"sso_link"`
	}
	admin.ok(http.MethodGet, fmt.Sprintf("/api/admin/users/%d/sign_in", carol.ID), nil).decode(t, &view)
	if view.SSOLink.Subject != "carol-sub" {
		t.Fatalf("the first sign-in did not fill the subject in: %+v", view)
	}
	// she keeps her password
	newClient(t, g).login("carol")
	// one identity, one account
	createUser(g, "carol2", 0, "user")
	admin.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/sso_link", g.User("carol2").ID), map[string]string{"subject": "carol-sub"}).apiErr(t, 400, "sso_identity_linked")
	// unlinked, the same identity is a new account of its email
	admin.ok(http.MethodDelete, fmt.Sprintf("/api/admin/users/%d/sso_link", carol.ID), nil)
	if who := ssoSignIn(t, g).self(); who.Username != "carol@a.example" {
		t.Fatalf("after unlinking the sign-in is %q", who.Username)
	}

	// an administrator signed in by the provider is not sent to enrol: the
	// provider answered for the second factor
	op.SignIn(oidctest.Identity{Subject: "dan-sub", Email: "dan@a.example", EmailVerified: true,
		Claims: map[string]any{"groups": []string{"admin"}}})
	dan := ssoSignIn(t, g)
	if who := dan.self(); who.Role != "admin" {
		t.Fatalf("dan is %+v", who)
	}
	dan.ok(http.MethodGet, "/api/admin/users", nil)

	entries, err := g.Store().ListAudit(context.Background(), store.AuditFilter{Target: fmt.Sprintf("user:%d", carol.ID), Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	var linked, unlinked bool
	for _, e := range entries {
		linked = linked || e.Action == "user.sso_link" && e.Actor == "ops"
		unlinked = unlinked || e.Action == "user.sso_unlink" && e.Actor == "ops"
	}
	if !linked || !unlinked {
		t.Fatalf("audit: linked %v, unlinked %v", linked, unlinked)
	}
}
