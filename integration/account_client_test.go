package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// What the account tests share: the gateway that serves the account API
// and the console, and a browser-like client of that API.

// accountConfig serves the account API, the console and the demo model
// (priced, so requests cost something) as Caddyfile.example does, with the
// registration policy and the account and signup rate limits given.
func accountConfig(registration string, rate, signups int) *caddyfile {
	return gatewayConfig().
		// lets the rate limit tests speak from several client addresses
		withServers("trusted_proxies static 127.0.0.1/32").
		option("token_cache_ttl 1s").
		option("registration "+registration).
		option("invitation_reward 250000").
		option(fmt.Sprintf("account_rate_limit %d 1m", rate)).
		option(fmt.Sprintf("registration_rate_limit %d 1h", signups)).
		channel("demo", "demo", "", "", "demo").
		price("demo", "input 1", "output 2").
		withSite(
			"@account path /api/user/* /api/admin/*",
			block("route @account", "gateway_account"),
			"@console path / /console /console/*",
			block("route @console", "gateway_console"),
			"@models path /v1/* /v1beta/*",
			block("route @models", "gateway_auth", "gateway_relay"))
}

func startAccounts(t *testing.T, registration string, rate int) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.Start(t, accountConfig(registration, rate, 1000).String(), nil)
}

// client is one browser-like caller: a cookie jar, and by default the
// headers a browser sends from the gateway's own pages.
type client struct {
	t      *testing.T
	g      *gatewaytest.Gateway
	http   *http.Client
	origin string // Origin sent on non-GET requests; "" sends none
	bearer string
	from   string // X-Forwarded-For, to speak from another address
}

func newClient(t *testing.T, g *gatewaytest.Gateway) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, g: g, http: &http.Client{Jar: jar}, origin: g.URL}
}

type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a apiAnswer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("apiAnswer %d is not the JSON expected: %v\n%s", a.status, err, a.body)
	}
}

// apiErr checks the OpenAI error shape and returns the error object.
func (a apiAnswer) apiErr(t *testing.T, status int, code string) (msg string) {
	t.Helper()
	e, ok := errorBody(a.body)
	if a.status != status || !ok || e.Message == "" || e.Type == "" {
		t.Fatalf("got %d %s, want %d with an OpenAI-shaped error", a.status, a.body, status)
	}
	if code != "" && e.Code != code {
		t.Fatalf("error code %q (%s), want %q", e.Code, e.Message, code)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error content type %q", ct)
	}
	return e.Message
}

func (c *client) do(method, path string, body any, header ...string) apiAnswer {
	c.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.g.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.from != "" {
		req.Header.Set("X-Forwarded-For", c.from)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
}

func (c *client) ok(method, path string, body any) apiAnswer {
	c.t.Helper()
	a := c.do(method, path, body)
	if a.status != http.StatusOK {
		c.t.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
	}
	return a
}

type apiUser struct {
	ID        int64  `json:"id"`
	Username  string `json:"username"`
	Role      string `json:"role"`
	Status    string `json:"status"`
	Quota     int64  `json:"quota"`
	UsedQuota int64  `json:"used_quota"`
	AffCode   string `json:"aff_code"`
	AffQuota  int64  `json:"aff_quota"`
}

func (c *client) self() apiUser {
	c.t.Helper()
	var u apiUser
	c.ok(http.MethodGet, "/api/user/self", nil).decode(c.t, &u)
	return u
}

// login logs in as a user made with gw.AddUser or createUser.
func (c *client) login(name string) apiUser {
	c.t.Helper()
	var u apiUser
	c.ok(http.MethodPost, "/api/user/login", map[string]string{"username": name, "password": "password-" + name}).decode(c.t, &u)
	return u
}

// createUser makes a user through the CLI, as tests elsewhere do.
func createUser(g *gatewaytest.Gateway, name string, quota int64, role string) {
	g.CLI("user", "add", "--username", name, "--password", "password-"+name, "--quota", fmt.Sprint(quota), "--role", role)
}

func loggedIn(t *testing.T, g *gatewaytest.Gateway, name string, quota int64, role string) *client {
	createUser(g, name, quota, role)
	c := newClient(t, g)
	c.login(name)
	return c
}

func makeCodes(t *testing.T, g *gatewaytest.Gateway, n int, quota int64) []string {
	return strings.Fields(g.CLI("redeem", "add", "--quota", fmt.Sprint(quota), "--count", fmt.Sprint(n)))
}
