package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Logging in and sessions: the session cookie, sliding expiry, sessions
// ended by a password or role change, CSRF, and the limits on login
// attempts.

func TestAccountLoginSessionAndLogout(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	createUser(g, "alice", 1_500_000, "user")
	c := newClient(t, g)

	a := c.do(http.MethodPost, "/api/user/login", map[string]string{"username": "alice", "password": "password-alice"})
	if a.status != 200 {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	var u apiUser
	a.decode(t, &u)
	if u.Username != "alice" || u.Role != "user" || u.Quota != 1_500_000 || u.AffCode == "" || u.ID == 0 {
		t.Fatalf("login answered %+v", u)
	}
	for _, field := range []string{`"used_quota"`, `"aff_quota"`, `"aff_code"`} {
		if !bytes.Contains(a.body, []byte(field)) {
			t.Fatalf("login apiAnswer lacks %s: %s", field, a.body)
		}
	}
	if bytes.Contains(a.body, []byte("password")) || bytes.Contains(a.body, []byte("$2a$")) {
		t.Fatalf("login apiAnswer shows the password hash: %s", a.body)
	}
	cookies := (&http.Response{Header: a.header}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != "gateway_session" || !cookies[0].HttpOnly ||
		cookies[0].SameSite != http.SameSiteLaxMode || cookies[0].Secure || cookies[0].Path != "/" || cookies[0].MaxAge <= 0 || len(cookies[0].Value) < 40 {
		t.Fatalf("session cookie = %+v", cookies)
	}
	// the store keeps a hash, not the cookie's value
	if _, err := g.Store().SessionByHash(context.Background(), cookies[0].Value); err == nil {
		t.Fatal("the session id itself is stored as the key")
	}
	if _, err := g.Store().SessionByHash(context.Background(), keys.Hash(cookies[0].Value)); err != nil {
		t.Fatalf("the session is not stored under its hash: %v", err)
	}
	if got := c.self(); got.ID != u.ID {
		t.Fatalf("self = %+v", got)
	}

	// one message for a wrong password and an unknown name
	wrong := newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "alice", "password": "not-her-password"})
	unknown := newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "nobody", "password": "whatever-it-is"})
	if m1, m2 := wrong.apiErr(t, 401, "invalid_credentials"), unknown.apiErr(t, 401, "invalid_credentials"); m1 != m2 {
		t.Fatalf("messages differ: %q and %q", m1, m2)
	}
	newClient(t, g).do(http.MethodPost, "/api/user/login", `{"username":`).apiErr(t, 400, "invalid_json")
	newClient(t, g).do(http.MethodPost, "/api/user/login", `{"username":"alice","password":"x","extra":1}`).apiErr(t, 400, "invalid_json")
	newClient(t, g).do(http.MethodPost, "/api/user/login", `username=alice`, "Content-Type", "application/x-www-form-urlencoded").apiErr(t, 415, "")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "alice", "password": "password-alice"},
		"Origin", "http://evil.example").apiErr(t, 403, "cross_origin")
	newClient(t, g).do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "not_logged_in")
	newClient(t, g).do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session=forged").apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodGet, "/api/user/nope", nil).apiErr(t, 404, "unknown_endpoint")
	a = newClient(t, g).do(http.MethodGet, "/api/user/login", nil)
	a.apiErr(t, 405, "method_not_allowed")
	if a.header.Get("Allow") != "POST" {
		t.Fatalf("Allow = %q", a.header.Get("Allow"))
	}

	// the models the playground offers: served and priced
	var models struct{ Data []struct{ ID string } }
	c.ok(http.MethodGet, "/api/user/models", nil).decode(t, &models)
	if len(models.Data) != 1 || models.Data[0].ID != "demo" {
		t.Fatalf("models = %+v", models)
	}
	newClient(t, g).do(http.MethodGet, "/api/user/models", nil).apiErr(t, 401, "not_logged_in")

	// a management key works as well as the cookie; a plain key reaches
	// the model endpoints only
	bearer := newClient(t, g)
	bearer.bearer = g.AddToken("alice")
	bearer.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 403, "management_key_required")
	bearer.bearer = g.AddToken("alice", "--management")
	if got := bearer.self(); got.ID != u.ID {
		t.Fatalf("self by key = %+v", got)
	}
	bearer.bearer = "sk-wrong"
	bearer.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "invalid_api_key")

	c.ok(http.MethodPost, "/api/user/logout", struct{}{})
	c.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "")
	c.ok(http.MethodPost, "/api/user/logout", struct{}{}) // twice is fine
}

// TestAccountSessionSlides plants a session that has used most of its
// lifetime and checks that using it moves the expiry forward, in the store
// and in the cookie, while a fresh session is not rewritten on each request.
func TestAccountSessionSlides(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	createUser(g, "slider", 0, "user")
	st := g.Store()
	ctx := context.Background()
	id := "planted-session-id-with-enough-randomness-0123"
	old := time.Now().Add(time.Hour) // of the default 7 days
	if err := st.CreateSession(ctx, &store.Session{IDHash: keys.Hash(id), UserID: g.User("slider").ID, ExpiresAt: old}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, g)
	a := c.do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session="+id)
	if a.status != 200 {
		t.Fatalf("self with the planted session: %d %s", a.status, a.body)
	}
	cookies := (&http.Response{Header: a.header}).Cookies()
	if len(cookies) != 1 || cookies[0].Value != id || cookies[0].MaxAge < 6*24*3600 {
		t.Fatalf("cookie after sliding: %+v", cookies)
	}
	sess, err := st.SessionByHash(ctx, keys.Hash(id))
	if err != nil || sess.ExpiresAt.Before(time.Now().Add(6*24*time.Hour)) {
		t.Fatalf("stored expiry %v, %v; want about 7 days ahead", sess.ExpiresAt, err)
	}
	a = c.do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session="+id)
	if a.status != 200 || a.header.Get("Set-Cookie") != "" {
		t.Fatalf("a fresh session was rewritten: %d %q", a.status, a.header.Get("Set-Cookie"))
	}
}

// TestAccountSessionEndsAfterItsMaximum: a session slides while it is
// used, but never past its maximum lifetime from the login (30 days by
// default, session_max_lifetime when set): a cookie used now and then
// does not last forever.
func TestAccountSessionEndsAfterItsMaximum(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	createUser(g, "keeper", 0, "user")
	st := g.Store()
	ctx := context.Background()
	plant := func(id string, created, expires time.Time) {
		t.Helper()
		if err := st.CreateSession(ctx, &store.Session{IDHash: keys.Hash(id), UserID: g.User("keeper").ID,
			CreatedAt: created, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	day := 24 * time.Hour
	// logged in 31 days ago and used every few days since: over
	plant("session-slid-for-a-month-and-a-day-0000000001", time.Now().Add(-31*day), time.Now().Add(6*day))
	newClient(t, g).do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session=session-slid-for-a-month-and-a-day-0000000001").
		apiErr(t, 401, "session_expired")
	// logged in 29 days ago: it slides, to the 30th day and no further
	created := time.Now().Add(-29 * day)
	plant("session-slid-for-twenty-nine-days-00000000002", created, time.Now().Add(time.Hour))
	a := newClient(t, g).do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session=session-slid-for-twenty-nine-days-00000000002")
	if a.status != 200 {
		t.Fatalf("a 29-day-old session: %d %s", a.status, a.body)
	}
	// and the cookie sent again says so
	if cookies := (&http.Response{Header: a.header}).Cookies(); len(cookies) != 1 || cookies[0].MaxAge > int(day.Seconds()) || cookies[0].MaxAge < int((day-time.Minute).Seconds()) {
		t.Fatalf("cookie after sliding to the maximum: %+v, want about a day", cookies)
	}
	sess, err := st.SessionByHash(ctx, keys.Hash("session-slid-for-twenty-nine-days-00000000002"))
	if err != nil || sess.ExpiresAt.After(created.Add(30*day)) || sess.ExpiresAt.Before(created.Add(30*day-time.Minute)) {
		t.Fatalf("slid to %v, %v; want the 30th day from the login, %v", sess.ExpiresAt, err, created.Add(30*day))
	}

	// a maximum of its own
	g.Reload(accountConfig("on", 1000, 1000).option("session_max_lifetime 2h").String(), nil)
	plant("session-made-three-hours-ago-0000000000000003", time.Now().Add(-3*time.Hour), time.Now().Add(6*day))
	newClient(t, g).do(http.MethodGet, "/api/user/self", nil, "Cookie", "gateway_session=session-made-three-hours-ago-0000000000000003").
		apiErr(t, 401, "session_expired")
	c := newClient(t, g)
	c.login("keeper")
	c.self()
}

// TestAccountSessionsEnd: a password change, through the API or the CLI,
// ends every other session of the user (the API keeps the one that asked);
// a role change ends the user's sessions; "log out everywhere" ends them
// all, with the session or with a key.
func TestAccountSessionsEnd(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	createUser(g, "pat", 0, "user")
	here, there := newClient(t, g), newClient(t, g)
	here.login("pat")
	there.login("pat")

	here.do(http.MethodPost, "/api/user/password", map[string]string{"current_password": "wrong-password", "password": "a-new-password"}).
		apiErr(t, 400, "invalid_request")
	here.do(http.MethodPost, "/api/user/password", map[string]string{"current_password": "password-pat", "password": "short"}).
		apiErr(t, 400, "invalid_request")
	there.self() // refused changes end nothing
	here.ok(http.MethodPost, "/api/user/password", map[string]string{"current_password": "password-pat", "password": "a-new-password"})
	here.self()
	there.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "pat", "password": "password-pat"}).
		apiErr(t, 401, "invalid_credentials")
	there.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "pat", "password": "a-new-password"})

	// the CLI ends them all
	g.CLI("user", "passwd", "--username", "pat", "--password", "password-pat")
	here.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	there.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")

	// a role change, either way
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})
	patPath := fmt.Sprint("/api/admin/users/", g.User("pat").ID)
	for _, role := range []string{"admin", "user"} {
		here.login("pat")
		root.ok(http.MethodPatch, patPath, map[string]any{"role": role})
		here.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	}
	// changing something else ends nothing
	here.login("pat")
	root.ok(http.MethodPatch, patPath, map[string]any{"quota_delta": 5})
	here.self()

	// log out everywhere, with the cookie: this session's cookie is cleared
	there.login("pat")
	a := here.ok(http.MethodPost, "/api/user/logout_all", struct{}{})
	if cookies := (&http.Response{Header: a.header}).Cookies(); len(cookies) != 1 || cookies[0].MaxAge >= 0 {
		t.Fatalf("log out everywhere left the cookie: %+v", cookies)
	}
	there.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	here.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "not_logged_in")
	// and with a key, for a device whose cookie is out of reach
	here.login("pat")
	keyed := newClient(t, g)
	keyed.bearer = g.AddToken("pat", "--management")
	keyed.ok(http.MethodPost, "/api/user/logout_all", struct{}{})
	here.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodPost, "/api/user/logout_all", struct{}{}).apiErr(t, 401, "not_logged_in")
}

// TestAccountSessionCookieBehindTLSProxy: behind a TLS-terminating proxy
// the server trusts, X-Forwarded-Proto: https makes the session cookie
// Secure and __Host- prefixed, and only that name is read over HTTPS; from
// a peer the server does not trust the same header changes nothing.
func TestAccountSessionCookieBehindTLSProxy(t *testing.T) {
	login := func(g *gatewaytest.Gateway) *http.Cookie {
		t.Helper()
		a := newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "tess", "password": "password-tess"},
			"X-Forwarded-Proto", "https")
		cookies := (&http.Response{Header: a.header}).Cookies()
		if a.status != 200 || len(cookies) != 1 {
			t.Fatalf("login: %d %s, cookies %+v", a.status, a.body, cookies)
		}
		return cookies[0]
	}

	trusted := startAccounts(t, "off", 1000) // trusts 127.0.0.1
	createUser(trusted, "tess", 0, "user")
	c := login(trusted)
	if c.Name != "__Host-gateway_session" || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Fatalf("cookie behind a trusted TLS proxy: %+v", c)
	}
	self := func(g *gatewaytest.Gateway, cookie string) apiAnswer {
		return newClient(t, g).do(http.MethodGet, "/api/user/self", nil, "Cookie", cookie, "X-Forwarded-Proto", "https")
	}
	if a := self(trusted, "__Host-gateway_session="+c.Value); a.status != 200 {
		t.Fatalf("self with the __Host- cookie: %d %s", a.status, a.body)
	}
	// a cookie without the prefix (one a subdomain could plant) is not a session over HTTPS
	self(trusted, "gateway_session="+c.Value).apiErr(t, 401, "not_logged_in")

	untrusted := gatewaytest.Start(t, accountConfig("off", 1000, 1000).withServers("trusted_proxies static 192.0.2.0/24").String(), nil)
	createUser(untrusted, "tess", 0, "user")
	c = login(untrusted)
	if c.Name != "gateway_session" || c.Secure {
		t.Fatalf("an untrusted peer's X-Forwarded-Proto changed the cookie: %+v", c)
	}
	if a := self(untrusted, "gateway_session="+c.Value); a.status != 200 {
		t.Fatalf("self: %d %s", a.status, a.body)
	}
}

func TestAccountCSRF(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := loggedIn(t, g, "victim", 1_000_000, "user")
	tokens := func() int {
		var list struct{ Data []apiToken }
		c.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
		return len(list.Data)
	}
	for name, h := range map[string][]string{
		"no origin":          {"Origin", ""},
		"other origin":       {"Origin", "http://evil.example"},
		"cross-site fetch":   {"Sec-Fetch-Site", "cross-site", "Origin", ""},
		"same-site sibling":  {"Sec-Fetch-Site", "same-site"},
		"form content type":  {"Content-Type", "application/x-www-form-urlencoded"},
		"plain content type": {"Content-Type", "text/plain"},
	} {
		t.Run(name, func(t *testing.T) {
			c.do(http.MethodPost, "/api/user/tokens", `{"name":"planted"}`, h...).apiErr(t, 403, "cross_origin")
			c.do(http.MethodDelete, "/api/user/tokens/1", nil, h...).apiErr(t, 403, "cross_origin")
			// the playground's cookie access to the model endpoint too
			c.do(http.MethodPost, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, h...).
				apiErr(t, 403, "cross_origin_session")
		})
	}
	if n := tokens(); n != 0 {
		t.Fatalf("a cross-site request created %d tokens", n)
	}
	// the page's own requests pass, by Origin or by Sec-Fetch-Site
	c.ok(http.MethodPost, "/api/user/tokens", map[string]string{"name": "by-origin"})
	a := c.do(http.MethodPost, "/api/user/tokens", map[string]string{"name": "by-fetch-site"}, "Origin", "", "Sec-Fetch-Site", "same-origin")
	if a.status != 200 || tokens() != 2 {
		t.Fatalf("same-origin request: %d %s", a.status, a.body)
	}
	// a (management) key needs no Origin: it cannot be sent by another
	// site's page
	keyed := newClient(t, g)
	keyed.origin = ""
	keyed.bearer = g.AddToken("victim", "--management")
	keyed.ok(http.MethodPost, "/api/user/tokens", map[string]string{"name": "by-key"})
}

func TestAccountRateLimits(t *testing.T) {
	g := startAccounts(t, "on", 3)
	createUser(g, "target", 0, "user")
	c := newClient(t, g)
	c.from = "10.0.0.1"
	wrong := map[string]string{"username": "target", "password": "wrong-password"}
	for range 3 {
		c.do(http.MethodPost, "/api/user/login", wrong).apiErr(t, 401, "invalid_credentials")
	}
	a := c.do(http.MethodPost, "/api/user/login", wrong)
	a.apiErr(t, 429, "rate_limited")
	if a.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// the right password from the same address is refused too: the limit
	// is on attempts, or a guesser would learn when it guessed right
	c.do(http.MethodPost, "/api/user/login", map[string]string{"username": "target", "password": "password-target"}).apiErr(t, 429, "rate_limited")

	// another address is not locked out of the name by those failures:
	// the right password from an address that has not failed gets in
	c2 := newClient(t, g)
	c2.from = "10.0.0.2"
	c2.login("target")
	// and while someone fails at the name from elsewhere, its owner's one
	// typo from their own address does not lock them out
	typo := newClient(t, g)
	typo.from = "10.0.5.1"
	typo.do(http.MethodPost, "/api/user/login", map[string]string{"username": "target", "password": "password-targe"}).apiErr(t, 401, "invalid_credentials")
	typo.login("target")
	// but a guesser spread over many addresses is slowed: with the name's
	// failures over the limit, each address that fails at it twice gets
	// no third attempt, not even with the right password
	for i := range 3 {
		spread := newClient(t, g)
		spread.from = fmt.Sprint("10.0.3.", i)
		spread.do(http.MethodPost, "/api/user/login", wrong).apiErr(t, 401, "invalid_credentials")
		spread.do(http.MethodPost, "/api/user/login", wrong).apiErr(t, 401, "invalid_credentials")
		spread.do(http.MethodPost, "/api/user/login", wrong).apiErr(t, 429, "rate_limited")
		spread.do(http.MethodPost, "/api/user/login", map[string]string{"username": "target", "password": "password-target"}).apiErr(t, 429, "rate_limited")
	}
	clean := newClient(t, g)
	clean.from = "10.0.4.1"
	clean.login("target")
	// another name from a fresh address is untouched
	createUser(g, "bystander", 0, "user")
	c3 := newClient(t, g)
	c3.from = "10.0.0.3"
	c3.login("bystander")
	// people logging in behind one address do not use up each other's
	// attempts: only failures count against it
	for range 5 {
		newClient(t, g).login("bystander")
	}

	// registration attempts, by address
	r := newClient(t, g)
	r.from = "10.0.0.4"
	for i := range 3 {
		r.ok(http.MethodPost, "/api/user/register", map[string]string{"username": fmt.Sprint("reg", i), "password": "long-enough"})
	}
	r.do(http.MethodPost, "/api/user/register", map[string]string{"username": "reg9", "password": "long-enough"}).apiErr(t, 429, "rate_limited")

	// topup, by user, whatever the address
	for i := range 3 {
		c3.from = fmt.Sprint("10.0.1.", i)
		c3.do(http.MethodPost, "/api/user/topup", map[string]string{"key": "GUESS"}).apiErr(t, 400, "invalid_redemption_code")
	}
	c3.from = "10.0.2.1"
	c3.do(http.MethodPost, "/api/user/topup", map[string]string{"key": "GUESS"}).apiErr(t, 429, "rate_limited")
}

// TestAccountLongUsernameRefused: a login or signup whose username no
// user can have is refused as bad input before the rate limiter keeps
// anything of it (each would otherwise hold up to the body limit), and so
// does not count against the address either.
func TestAccountLongUsernameRefused(t *testing.T) {
	g := startAccounts(t, "on", 3)
	createUser(g, "plain", 0, "user")
	c := newClient(t, g)
	c.from = "10.9.9.9"
	for i := range 10 {
		long := fmt.Sprint(i, strings.Repeat("u", 60<<10))
		msg := c.do(http.MethodPost, "/api/user/login", map[string]string{"username": long, "password": "whatever-it-is"}).apiErr(t, 400, "invalid_request")
		if !strings.Contains(msg, "at most 64 characters") {
			t.Fatalf("login with a 60 KB username: %q", msg)
		}
		c.do(http.MethodPost, "/api/user/register", map[string]string{"username": long, "password": "long-enough"}).apiErr(t, 400, "invalid_request")
	}
	c.login("plain")
}
