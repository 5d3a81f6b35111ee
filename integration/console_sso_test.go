package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/internal/oidctest"
)

// Single sign-on through an OpenID Connect provider run in the test
// (internal/oidctest), in the browser: the login page offers it, a person
// lands logged in, comes back as the same user, is made an administrator
// by the role claim, and is refused in words when their domain may not
// sign in; the client secret and the provider's tokens stay out of the
// logs and the admin API.

const ssoSecretEnv = "GATEWAY_TEST_OIDC_SECRET"

// ssoConfig is the account gateway signing in through issuer.
func ssoConfig(issuer string) *caddyfile {
	return accountConfig("off", 1000, 1000).option(block("sso oidc",
		"issuer "+issuer,
		"client_id gateway-console",
		"client_secret {env."+ssoSecretEnv+"}",
		"allowed_domains a.example b.example",
		"role_claim groups"))
}

// startSSO runs a provider approving who and a gateway signing in
// through it, with the client secret only in the environment.
func startSSO(t *testing.T, who oidctest.Identity) (*gatewaytest.Gateway, *oidctest.Provider) {
	t.Helper()
	const secret = "oidc-client-secret-5f2c9a71"
	gatewaytest.Secret(secret)
	t.Setenv(ssoSecretEnv, secret)
	op := oidctest.Start(t, "gateway-console", secret, who)
	return gatewaytest.Start(t, ssoConfig(op.URL).String(), nil), op
}

func (b *browserSession) signInWithSSO() {
	b.t.Helper()
	b.open("/", `!document.getElementById('login-card').hidden && !document.getElementById('sso').hidden`)
	b.do(chromedp.Click(chromedp.ID("sso-login")))
}

func (b *browserSession) logOut() {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.ID("logout")))
	b.waitFor(`!document.getElementById('login-card').hidden`)
}

func TestConsoleSSO(t *testing.T) {
	ann := oidctest.Identity{Subject: "ann-sub-1", Email: "Ann@A.example", EmailVerified: true,
		Claims: map[string]any{"groups": []string{"staff"}}}
	g, op := startSSO(t, ann)
	b := startBrowser(t, g)

	// the login page offers single sign-on beside the password form
	b.open("/", `!document.getElementById('login-card').hidden && !document.getElementById('sso').hidden`)
	if got := b.text("sso-login"); got != "Sign in with SSO" {
		t.Fatalf("the SSO control says %q", got)
	}
	b.screenshot("sso-login")

	// first sign-in: the user is made and lands logged in
	b.signInWithSSO()
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent !== ''`)
	if who := b.text("whoami"); who != "ann@a.example" {
		t.Fatalf("signed in as %q", who)
	}
	if evalJS[bool](b, `!document.getElementById('nav-admin').hidden`) {
		t.Fatal("a user without the admin group sees the admin link")
	}
	first := g.User("ann@a.example")
	if first.Role != "user" {
		t.Fatalf("first sign-in made %+v", first)
	}
	// the account works like any other: a key made in the console
	b.do(chromedp.SendKeys(chromedp.ID("token-name"), "sso-laptop"), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(`!document.getElementById('new-key').hidden`)
	b.screenshot("sso-signed-in")

	// second sign-in, now in the admin group: the same user, made admin
	b.logOut()
	ann.Claims = map[string]any{"groups": []string{"staff", "admin"}}
	op.SignIn(ann)
	b.signInWithSSO()
	b.waitFor(`!document.getElementById('dashboard').hidden && document.getElementById('whoami').textContent !== ''`)
	if who := b.text("whoami"); who != "ann@a.example (admin)" {
		t.Fatalf("second sign-in shows %q", who)
	}
	if again := g.User("ann@a.example"); again.ID != first.ID || again.Role != "admin" {
		t.Fatalf("second sign-in: user %d role %q, the first was user %d", again.ID, again.Role, first.ID)
	}
	b.waitFor(`document.querySelectorAll('#tokens tr[data-token-id]').length === 1`)
	// root, made at bootstrap, and ann
	if n, err := g.Store().CountUsers(context.Background()); err != nil || n != 2 {
		t.Fatalf("%d users after two sign-ins (%v), want root and ann", n, err)
	}

	// a domain that may not sign in: back on the login page, told why
	b.logOut()
	op.SignIn(oidctest.Identity{Subject: "eve-sub", Email: "eve@evil.example", EmailVerified: true})
	b.signInWithSSO()
	b.waitFor(`document.getElementById('sso-error').textContent !== ''`)
	if msg := b.text("sso-error"); !strings.Contains(msg, "domain is not allowed") {
		t.Fatalf("a disallowed domain is told %q", msg)
	}
	if evalJS[bool](b, `!document.getElementById('dashboard').hidden || location.search.includes('sso_error')`) {
		t.Fatal("after a refused sign-in the dashboard shows, or the address keeps the error")
	}
	b.screenshot("sso-refused")
	// an unverified email and a disabled account are refused in words too
	op.SignIn(oidctest.Identity{Subject: "ben-sub", Email: "ben@b.example", EmailVerified: false})
	b.signInWithSSO()
	b.waitFor(`document.getElementById('sso-error').textContent !== ''`)
	if msg := b.text("sso-error"); !strings.Contains(msg, "not verified") {
		t.Fatalf("an unverified email is told %q", msg)
	}
	g.CLI("user", "disable", "--username", "ann@a.example")
	op.SignIn(ann)
	b.signInWithSSO()
	b.waitFor(`document.getElementById('sso-error').textContent !== ''`)
	if msg := b.text("sso-error"); !strings.Contains(msg, "disabled") {
		t.Fatalf("a disabled account is told %q", msg)
	}

	// no secret and no token in the logs; the admin API shows the
	// placeholder, never the secret
	for _, s := range op.Issued() {
		gatewaytest.Secret(s)
	}
	logs := g.Logs()
	for _, s := range append(op.Issued(), "oidc-client-secret-5f2c9a71") {
		if strings.Contains(logs, s) {
			t.Fatalf("the logs hold %.12s...", s)
		}
	}
	resp, err := http.Get("http://" + g.Admin + "/config/apps/gateway/sso")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), "oidc-client-secret") || !strings.Contains(string(body), "{env."+ssoSecretEnv+"}") {
		t.Fatalf("the admin API shows the sso config as %d %s", resp.StatusCode, body)
	}
}

// TestSSOWithoutProviderConfigured: the login page offers no SSO and its
// routes say it is not configured.
func TestSSOWithoutProviderConfigured(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	c := newClient(t, g)
	var status struct{ OIDC bool }
	c.ok(http.MethodGet, "/api/user/sso", nil).decode(t, &status)
	if status.OIDC {
		t.Fatal("sso status says oidc without a provider")
	}
	c.do(http.MethodGet, "/api/user/oidc/login", nil).apiErr(t, 404, "sso_not_configured")
	b := startBrowser(t, g)
	b.open("/", `!document.getElementById('login-card').hidden`)
	b.waitFor(`document.getElementById('sso').hidden`)
}

// TestSSOCallbackKeptOutOfAccessLog: a site's plain access log shows the
// sign-in callback without the provider's code and state, which a log
// reader could otherwise race the browser to exchange.
func TestSSOCallbackKeptOutOfAccessLog(t *testing.T) {
	const secret = "oidc-client-secret-0c41e9d2"
	gatewaytest.Secret(secret)
	t.Setenv(ssoSecretEnv, secret)
	op := oidctest.Start(t, "gateway-console", secret, oidctest.Identity{Subject: "liv-sub", Email: "liv@a.example", EmailVerified: true})
	logFile := filepath.Join(t.TempDir(), "access.log")
	cfg := ssoConfig(op.URL).withSite(
		block("log", "output file {{LOG}}", "format json"),
		"@account path /api/user/* /api/admin/*",
		block("route @account", "gateway_account"))
	g := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"LOG": logFile})

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	client := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		// a browser sends another site at most its origin, and keeps a
		// navigation's first referrer across redirects
		r.Header.Del("Referer")
		for _, p := range []string{"code", "state"} {
			if v := r.URL.Query().Get(p); v != "" {
				secrets = append(secrets, v)
			}
		}
		return nil
	}}
	resp, err := client.Get(g.URL + "/api/user/oidc/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(secrets) != 3 { // the state to the provider, then the code and the state back
		t.Fatalf("saw %d codes and states in the redirects, want 3", len(secrets))
	}
	if g.User("liv@a.example") == nil {
		t.Fatal("the sign-in made no user")
	}
	var logs []byte
	eventually(t, "the callback's access log line", func() bool {
		logs, _ = os.ReadFile(logFile)
		return bytes.Contains(logs, []byte(`"uri":"/api/user/oidc/callback"`)) && bytes.Contains(logs, []byte(`"uri":"/api/user/oidc/login"`))
	})
	for _, s := range secrets {
		if bytes.Contains(logs, []byte(s)) {
			t.Fatalf("the access log holds the sign-in's code or state %.8s...\n%s", s, logs)
		}
	}
}
