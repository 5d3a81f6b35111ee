package accountapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/account/oidc"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/internal/oidctest"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// ssoAPI is the API with single sign-on through a fake provider; trusted
// says whether every peer counts as a trusted proxy.
func ssoAPI(t *testing.T, who oidctest.Identity, trusted bool) (*accountapi.Handler, *oidctest.Provider) {
	t.Helper()
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	op := oidctest.Start(t, "gw", "client-secret", who)
	sso, err := oidc.New(oidc.Config{Issuer: op.URL, ClientID: "gw", ClientSecret: "client-secret", AllowedDomains: []string{"a.example"}}, st)
	if err != nil {
		t.Fatal(err)
	}
	h := accountapi.New(accountapi.Config{
		Store: st, Keys: keys.NewCache(st, time.Second), Ledger: billing.NewLedger(),
		Gate:     account.NewGate(st, account.GateConfig{}),
		Sessions: &accountapi.Sessions{Logins: account.Sessions{Store: st}, TrustedProxy: func(*http.Request) bool { return trusted }},
		SSO:      sso,
	})
	return h, op
}

// follow asks the provider for the authorize URL as a browser would and
// returns where it sends the browser back.
func follow(t *testing.T, authURL string) *url.URL {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("provider answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back
}

func cookieNamed(w *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range w.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSSOSignInStartsASession(t *testing.T) {
	h, _ := ssoAPI(t, oidctest.Identity{Subject: "s1", Email: "ann@a.example", EmailVerified: true}, false)
	if w := do(h, "GET", "/api/user/sso", "", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"oidc":true`) {
		t.Fatalf("sso status: %d %s", w.Code, w.Body)
	}
	start := do(h, "GET", "/api/user/oidc/login", "", nil)
	flow := cookieNamed(start, "gateway_oidc")
	if start.Code != http.StatusFound || flow == nil || !flow.HttpOnly || flow.MaxAge <= 0 {
		t.Fatalf("login: %d, flow cookie %+v", start.Code, flow)
	}
	authURL, _ := url.Parse(start.Header().Get("Location"))
	if got := authURL.Query().Get("redirect_uri"); got != "http://example.com/api/user/oidc/callback" {
		t.Fatalf("redirect_uri %q", got)
	}
	back := follow(t, authURL.String())
	done := do(h, "GET", back.RequestURI(), "", func(r *http.Request) { r.AddCookie(flow) })
	session := cookieNamed(done, "gateway_session")
	if done.Code != http.StatusFound || done.Header().Get("Location") != "/" || session == nil || session.Value == "" {
		t.Fatalf("callback: %d to %q, session %+v", done.Code, done.Header().Get("Location"), session)
	}
	if c := cookieNamed(done, "gateway_oidc"); c == nil || c.MaxAge >= 0 {
		t.Fatalf("the flow cookie is not cleared: %+v", c)
	}
	self := do(h, "GET", "/api/user/self", "", func(r *http.Request) { r.AddCookie(session) })
	if self.Code != 200 || !strings.Contains(self.Body.String(), `"username":"ann@a.example"`) {
		t.Fatalf("self after sign-in: %d %s", self.Code, self.Body)
	}
	// the same callback again: the code is spent and the cookie gone
	again := do(h, "GET", back.RequestURI(), "", nil)
	if loc := again.Header().Get("Location"); loc != "/?sso_error=expired" {
		t.Fatalf("a replayed callback goes to %q", loc)
	}
}

func TestSSOFailuresLandOnThePage(t *testing.T) {
	h, op := ssoAPI(t, oidctest.Identity{Subject: "s2", Email: "eve@evil.example", EmailVerified: true}, false)
	run := func() string {
		start := do(h, "GET", "/api/user/oidc/login", "", nil)
		back := follow(t, start.Header().Get("Location"))
		done := do(h, "GET", back.RequestURI(), "", func(r *http.Request) { r.AddCookie(cookieNamed(start, "gateway_oidc")) })
		if cookieNamed(done, "gateway_session") != nil {
			t.Fatal("a refused sign-in set a session cookie")
		}
		return done.Header().Get("Location")
	}
	if loc := run(); loc != "/?sso_error=domain_not_allowed" {
		t.Fatalf("a disallowed domain goes to %q", loc)
	}
	op.SignIn(oidctest.Identity{Deny: true})
	if loc := run(); loc != "/?sso_error=denied" {
		t.Fatalf("a cancelled sign-in goes to %q", loc)
	}
}

func TestSSOBehindATrustedProxy(t *testing.T) {
	proxied := func(r *http.Request) {
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("X-Forwarded-Host", "gw.example")
	}
	h, _ := ssoAPI(t, oidctest.Identity{}, true)
	w := do(h, "GET", "/api/user/oidc/login", "", proxied)
	u, _ := url.Parse(w.Header().Get("Location"))
	if got := u.Query().Get("redirect_uri"); got != "https://gw.example/api/user/oidc/callback" {
		t.Fatalf("behind a trusted proxy, redirect_uri %q", got)
	}
	if c := cookieNamed(w, "__Host-gateway_oidc"); c == nil || !c.Secure {
		t.Fatalf("over HTTPS the flow cookie is %+v", w.Result().Cookies())
	}
	// an untrusted peer's headers are its own word
	h, _ = ssoAPI(t, oidctest.Identity{}, false)
	w = do(h, "GET", "/api/user/oidc/login", "", proxied)
	u, _ = url.Parse(w.Header().Get("Location"))
	if got := u.Query().Get("redirect_uri"); got != "http://example.com/api/user/oidc/callback" {
		t.Fatalf("from an untrusted peer, redirect_uri %q", got)
	}
}

func TestSSONotConfigured(t *testing.T) {
	h, _ := newAPI(t)
	if w := do(h, "GET", "/api/user/sso", "", nil); !strings.Contains(w.Body.String(), `"oidc":false`) {
		t.Fatalf("sso status: %s", w.Body)
	}
	for _, p := range []string{"/api/user/oidc/login", "/api/user/oidc/callback?code=x&state=y"} {
		if w := do(h, "GET", p, "", nil); w.Code != http.StatusNotFound || errorCode(t, w) != "sso_not_configured" {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
	}
}
