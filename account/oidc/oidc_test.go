package oidc_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/oidc"
	"github.com/caddy-model-gateway/gateway/internal/oidctest"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

const callback = "http://gateway.test/api/user/oidc/callback"

func setup(t *testing.T, who oidctest.Identity, edit func(*oidc.Config)) (*oidc.Provider, *oidctest.Provider, store.Store) {
	t.Helper()
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	op := oidctest.Start(t, "gateway", "s3cret-client", who)
	cfg := oidc.Config{Issuer: op.URL, ClientID: "gateway", ClientSecret: "s3cret-client",
		AllowedDomains: []string{"a.example", "B.example"}, RoleClaim: "roles"}
	if edit != nil {
		edit(&cfg)
	}
	p, err := oidc.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	return p, op, st
}

// approval is what the browser brings back from the provider.
type approval struct{ sealed, state, code, errParam string }

// authorize starts a sign-in and follows the provider's answer as a
// browser would, up to the redirect back to the gateway.
func authorize(t *testing.T, p *oidc.Provider) approval {
	t.Helper()
	authURL, sealed, err := p.Start(context.Background(), callback)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("the provider answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != callback {
		t.Fatalf("the provider sends the browser to %s, want %s", got, callback)
	}
	q := loc.Query()
	return approval{sealed: sealed, state: q.Get("state"), code: q.Get("code"), errParam: q.Get("error")}
}

func signIn(t *testing.T, p *oidc.Provider) (*store.User, error) {
	t.Helper()
	a := authorize(t, p)
	return p.Finish(context.Background(), a.sealed, a.state, a.code)
}

func reason(err error) oidc.Reason {
	var f *oidc.Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return ""
}

func TestFirstSignInCreatesTheUserAndTheSecondReusesIt(t *testing.T) {
	p, op, st := setup(t, oidctest.Identity{Subject: "sub-1", Email: "Ada@A.example", EmailVerified: true}, nil)
	u, err := signIn(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "ada@a.example" || u.Role != store.RoleUser || u.Status != store.UserEnabled || u.InviteCode == "" {
		t.Fatalf("first sign-in made %+v", u)
	}
	again, err := signIn(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != u.ID {
		t.Fatalf("second sign-in is user %d, the first made %d", again.ID, u.ID)
	}
	if n, _ := st.CountUsers(context.Background()); n != 1 {
		t.Fatalf("%d users after two sign-ins", n)
	}
	if op.Exchanges() != 2 {
		t.Fatalf("%d code exchanges, want 2", op.Exchanges())
	}
	// the account has no password anyone could guess
	gate := account.NewGate(st, account.GateConfig{})
	for _, pw := range []string{"", u.PasswordHash, "password"} {
		if _, err := gate.LogIn(context.Background(), "192.0.2.1", u.Username, pw); !errors.Is(err, account.ErrBadCredentials) {
			t.Fatalf("password login with %q: %v", pw, err)
		}
	}
}

func TestRoleClaim(t *testing.T) {
	p, op, st := setup(t, oidctest.Identity{Subject: "sub-2", Email: "bo@a.example", EmailVerified: true,
		Claims: map[string]any{"roles": []string{"staff", "admin"}}}, nil)
	u, err := signIn(t, p)
	if err != nil || u.Role != store.RoleAdmin {
		t.Fatalf("role claim [staff admin]: %+v, %v", u, err)
	}
	// the provider is the source of roles: taking admin away demotes
	op.SignIn(oidctest.Identity{Subject: "sub-2", Email: "bo@a.example", EmailVerified: true, Claims: map[string]any{"roles": "staff"}})
	if u, err = signIn(t, p); err != nil || u.Role != store.RoleUser {
		t.Fatalf("role claim staff: %+v, %v", u, err)
	}
	if got, _ := st.UserByID(context.Background(), u.ID); got.Role != store.RoleUser {
		t.Fatalf("stored role %q", got.Role)
	}
	// root is never given, and a root account keeps its role
	op.SignIn(oidctest.Identity{Subject: "sub-2", Email: "bo@a.example", EmailVerified: true, Claims: map[string]any{"roles": "root"}})
	if u, err = signIn(t, p); err != nil || u.Role != store.RoleUser {
		t.Fatalf("role claim root: %+v, %v", u, err)
	}
	if err := st.SetUserRole(context.Background(), u.ID, store.RoleRoot); err != nil {
		t.Fatal(err)
	}
	if u, err = signIn(t, p); err != nil || u.Role != store.RoleRoot {
		t.Fatalf("a root account signing in: %+v, %v", u, err)
	}
}

func TestNestedRoleClaimAndNoRoleClaim(t *testing.T) {
	who := oidctest.Identity{Subject: "sub-3", Email: "cy@b.example", EmailVerified: "true",
		Claims: map[string]any{"realm_access": map[string]any{"roles": []string{"admin"}}}}
	p, _, _ := setup(t, who, func(c *oidc.Config) { c.RoleClaim = "realm_access.roles" })
	if u, err := signIn(t, p); err != nil || u.Role != store.RoleAdmin {
		t.Fatalf("nested claim: %+v, %v", u, err)
	}
	p, _, _ = setup(t, who, func(c *oidc.Config) { c.RoleClaim = "" })
	if u, err := signIn(t, p); err != nil || u.Role != store.RoleUser {
		t.Fatalf("no role claim configured: %+v, %v", u, err)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		who  oidctest.Identity
		edit func(*oidc.Config)
		want oidc.Reason
	}{
		{"domain not allowed", oidctest.Identity{Subject: "x", Email: "eve@evil.example", EmailVerified: true}, nil, oidc.DomainNotAllowed},
		{"subdomain is another domain", oidctest.Identity{Subject: "x", Email: "eve@sub.a.example", EmailVerified: true}, nil, oidc.DomainNotAllowed},
		{"email not verified", oidctest.Identity{Subject: "x", Email: "eve@a.example", EmailVerified: false}, nil, oidc.EmailUnverified},
		{"email_verified left out", oidctest.Identity{Subject: "x", Email: "eve@a.example"}, nil, oidc.EmailUnverified},
		{"no email", oidctest.Identity{Subject: "x", EmailVerified: true}, nil, oidc.NoEmail},
		{"any domain with *", oidctest.Identity{Subject: "x", Email: "eve@evil.example", EmailVerified: true},
			func(c *oidc.Config) { c.AllowedDomains = []string{"*"} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, st := setup(t, tc.who, tc.edit)
			_, err := signIn(t, p)
			if reason(err) != tc.want || tc.want == "" && err != nil {
				t.Fatalf("got %v, want reason %q", err, tc.want)
			}
			if n, _ := st.CountUsers(context.Background()); tc.want != "" && n != 0 {
				t.Fatalf("a refused sign-in made %d users", n)
			}
		})
	}
}

func TestTheFlowCannotBeForgedOrReplayed(t *testing.T) {
	p, _, _ := setup(t, oidctest.Identity{Subject: "sub-4", Email: "di@a.example", EmailVerified: true}, nil)
	ctx := context.Background()
	a := authorize(t, p)
	other := authorize(t, p)
	for name, try := range map[string]approval{
		"no flow cookie":           {sealed: "", state: a.state, code: a.code},
		"a tampered flow":          {sealed: a.sealed[:len(a.sealed)-2] + "AA", state: a.state, code: a.code},
		"another sign-in's state":  {sealed: a.sealed, state: other.state, code: a.code},
		"another sign-in's cookie": {sealed: other.sealed, state: a.state, code: a.code},
	} {
		if _, err := p.Finish(ctx, try.sealed, try.state, try.code); reason(err) != oidc.Expired {
			t.Errorf("%s: %v, want %q", name, err, oidc.Expired)
		}
	}
	// another sign-in's code carries that sign-in's nonce and verifier
	if _, err := p.Finish(ctx, a.sealed, a.state, other.code); reason(err) != oidc.Failed {
		t.Errorf("a code from another sign-in: %v", err)
	}
	if _, err := p.Finish(ctx, a.sealed, a.state, a.code); err != nil {
		t.Fatal(err)
	}
	// a code is good once
	if _, err := p.Finish(ctx, a.sealed, a.state, a.code); reason(err) != oidc.Failed {
		t.Errorf("a replayed code: %v", err)
	}
	// a flow sealed for another client (another secret) is not ours
	q, _, _ := setup(t, oidctest.Identity{Subject: "sub-4", Email: "di@a.example", EmailVerified: true},
		func(c *oidc.Config) { c.ClientSecret = "another-secret" })
	b := authorize(t, q)
	if _, err := p.Finish(ctx, b.sealed, b.state, b.code); reason(err) != oidc.Expired {
		t.Errorf("a flow sealed under another secret: %v", err)
	}
}

func TestExistingAccountsAreNotTakenOver(t *testing.T) {
	p, op, st := setup(t, oidctest.Identity{Subject: "sub-5", Email: "fay@a.example", EmailVerified: true}, nil)
	ctx := context.Background()
	// someone registered the name with a password before fay signed in
	if _, err := account.CreateUser(ctx, st, account.Operator, account.NewUser{Username: "fay@a.example", Password: "squatter-password"}); err != nil {
		t.Fatal(err)
	}
	if _, err := signIn(t, p); reason(err) != oidc.NameTaken {
		t.Fatalf("signing in over a password account: %v", err)
	}
	// another subject with an email the first one used
	op.SignIn(oidctest.Identity{Subject: "sub-6", Email: "gus@a.example", EmailVerified: true})
	if _, err := signIn(t, p); err != nil {
		t.Fatal(err)
	}
	op.SignIn(oidctest.Identity{Subject: "sub-7", Email: "gus@a.example", EmailVerified: true})
	if _, err := signIn(t, p); reason(err) != oidc.NameTaken {
		t.Fatalf("another subject with gus's email: %v", err)
	}
}

func TestDisabledUsersAreRefused(t *testing.T) {
	p, _, st := setup(t, oidctest.Identity{Subject: "sub-8", Email: "hal@a.example", EmailVerified: true}, nil)
	u, err := signIn(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetUserStatus(context.Background(), u.ID, store.UserDisabled); err != nil {
		t.Fatal(err)
	}
	if _, err := signIn(t, p); reason(err) != oidc.Disabled {
		t.Fatalf("a disabled user signing in: %v", err)
	}
}

func TestProviderDownThenUp(t *testing.T) {
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	down := httptest.NewServer(http.NotFoundHandler())
	p, err := oidc.New(oidc.Config{Issuer: down.URL, ClientID: "c", ClientSecret: "s", AllowedDomains: []string{"a.example"}}, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Start(context.Background(), callback); reason(err) != oidc.Unavailable {
		t.Fatalf("discovery failing: %v", err)
	}
	down.Close()
	if _, _, err := p.Start(context.Background(), callback); reason(err) != oidc.Unavailable {
		t.Fatalf("provider unreachable: %v", err)
	}
}

func TestConfiguredRedirectURL(t *testing.T) {
	p, _, _ := setup(t, oidctest.Identity{}, func(c *oidc.Config) { c.RedirectURL = "https://gw.example/api/user/oidc/callback" })
	authURL, _, err := p.Start(context.Background(), callback)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	if got := u.Query().Get("redirect_uri"); got != "https://gw.example/api/user/oidc/callback" {
		t.Fatalf("redirect_uri %q", got)
	}
	if u.Query().Get("code_challenge_method") != "S256" || !strings.Contains(u.Query().Get("scope"), "email") {
		t.Fatalf("authorize URL %s", authURL)
	}
}

func TestConfigChecks(t *testing.T) {
	ok := oidc.Config{Issuer: "https://id.example", ClientID: "c", ClientSecret: "s", AllowedDomains: []string{"a.example"}}
	for name, edit := range map[string]func(*oidc.Config){
		"no issuer":          func(c *oidc.Config) { c.Issuer = "" },
		"issuer not a URL":   func(c *oidc.Config) { c.Issuer = "id.example" },
		"no client_id":       func(c *oidc.Config) { c.ClientID = "" },
		"no client_secret":   func(c *oidc.Config) { c.ClientSecret = "" },
		"no allowed_domains": func(c *oidc.Config) { c.AllowedDomains = nil },
		"relative redirect":  func(c *oidc.Config) { c.RedirectURL = "/cb" },
	} {
		c := ok
		edit(&c)
		if _, err := oidc.New(c, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := oidc.New(ok, nil); err != nil {
		t.Fatal(err)
	}
}

// The `sso oidc` block's options set the provider's configuration:
// allowed_domains adds one or more, the others take one value each.
func TestConfigSet(t *testing.T) {
	c := &oidc.Config{}
	for _, line := range [][]string{{"issuer", "https://id.example"}, {"client_id", "gw"}, {"client_secret", "{env.S}"},
		{"allowed_domains", "a.example", "b.example"}, {"allowed_domains", "c.example"}, {"role_claim", "realm_access.roles"}, {"redirect_url", "https://gw.example/cb"}} {
		if err := c.Set(line[0], line[1:]); err != nil {
			t.Fatalf("%v: %v", line, err)
		}
	}
	if c.Issuer != "https://id.example" || c.ClientID != "gw" || c.ClientSecret != "{env.S}" || len(c.AllowedDomains) != 3 ||
		c.RoleClaim != "realm_access.roles" || c.RedirectURL != "https://gw.example/cb" {
		t.Fatalf("set: %+v", c)
	}
	for _, line := range [][]string{{"issuer"}, {"issuer", "a", "b"}, {"allowed_domains"}, {"scopes", "openid"}} {
		if err := c.Set(line[0], line[1:]); err == nil {
			t.Errorf("%v accepted", line)
		}
	}
}
