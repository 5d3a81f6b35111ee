package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

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

	// a key works as well as the cookie
	key := g.AddToken("alice")
	bearer := newClient(t, g)
	bearer.bearer = key
	if got := bearer.self(); got.ID != u.ID {
		t.Fatalf("self by key = %+v", got)
	}
	bearer.bearer = "sk-wrong"
	bearer.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "invalid_api_key")

	c.ok(http.MethodPost, "/api/user/logout", struct{}{})
	c.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "")
	c.ok(http.MethodPost, "/api/user/logout", struct{}{}) // twice is fine
}

func TestAccountRegisterWithInvitation(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	inviter := loggedIn(t, g, "inviter", 0, "user")
	code := inviter.self().AffCode

	c := newClient(t, g)
	var u apiUser
	c.ok(http.MethodPost, "/api/user/register", map[string]string{"username": "newbie", "password": "long-enough", "aff_code": code}).decode(t, &u)
	if u.Username != "newbie" || u.Role != "user" || u.Quota != 0 || u.AffCode == "" || u.AffCode == code {
		t.Fatalf("registered %+v", u)
	}
	c.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "newbie", "password": "long-enough"})
	c.ok(http.MethodPost, "/api/user/register", map[string]string{"username": "plain", "password": "long-enough"})
	// the reward is owed, not paid, until the invitee pays
	if got := inviter.self(); got.AffQuota != 0 {
		t.Fatalf("inviter's aff_quota = %d after a signup alone, want 0", got.AffQuota)
	}
	c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 1)[0]})
	if got := inviter.self(); got.AffQuota != 250_000 {
		t.Fatalf("inviter's aff_quota = %d after the invitee paid, want 250000", got.AffQuota)
	}

	for name, body := range map[string]map[string]string{
		"taken name":      {"username": "newbie", "password": "long-enough"},
		"short password":  {"username": "shorty", "password": "short"},
		"no name":         {"username": "", "password": "long-enough"},
		"space in name":   {"username": "a b", "password": "long-enough"},
		"bad invite code": {"username": "someone", "password": "long-enough", "aff_code": "NOT-A-CODE"},
	} {
		t.Run(name, func(t *testing.T) {
			newClient(t, g).do(http.MethodPost, "/api/user/register", body).apiErr(t, 400, "invalid_request")
		})
	}
	if got := inviter.self(); got.AffQuota != 250_000 {
		t.Fatalf("a refused registration rewarded the inviter: %d", got.AffQuota)
	}
}

func TestAccountRegistrationClosedByDefault(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("", 1000, 1000).without("registration").String(), nil)
	newClient(t, g).do(http.MethodPost, "/api/user/register", map[string]string{"username": "x", "password": "long-enough"}).
		apiErr(t, 403, "registration_closed")
}

func TestAccountTopup(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	// no quota at all: a request without max_tokens is given what the
	// quota covers, so only an empty balance is refused outright
	c := loggedIn(t, g, "bob", 0, "user")
	codes := makeCodes(t, g, 4, 2_000_000)

	key := g.AddToken("bob")
	if s := chatOnce(t, g, key, "hello"); s != http.StatusTooManyRequests {
		t.Fatalf("with no quota a request gets %d, want 429", s)
	}
	a := c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[0]})
	// the new quota is spendable at once
	if s := chatOnce(t, g, key, "hello"); s != 200 {
		t.Fatalf("right after a topup a request gets %d", s)
	}
	if strings.TrimSpace(string(a.body)) != "{}" {
		t.Fatalf("topup answered %s, want {}", a.body)
	}
	g.WaitUsage("bob", 2)
	if got := c.self(); got.Quota+got.UsedQuota != 2_000_000 || got.UsedQuota == 0 {
		t.Fatalf("after topup and a request: quota %d, used %d; want them to sum to 2000000", got.Quota, got.UsedQuota)
	}

	// disable one code, expire another (through the store: the API refuses
	// to create a code that is already expired)
	st := g.Store()
	ctx := context.Background()
	list, err := st.ListRedemptionCodes(ctx, store.CodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range list {
		if rc.Code == codes[1] {
			if err := st.SetRedemptionCodeStatus(ctx, rc.ID, store.CodeDisabled); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "EXPIRED-CODE", Quota: 5, ExpiresAt: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, key := range []string{codes[0], codes[1], "EXPIRED-CODE", "NO-SUCH-CODE"} {
		msgs = append(msgs, c.do(http.MethodPost, "/api/user/topup", map[string]string{"key": key}).apiErr(t, 400, "invalid_redemption_code"))
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Fatalf("refusals differ, telling a guesser which codes exist: %q", msgs)
		}
	}
	c.do(http.MethodPost, "/api/user/topup", map[string]string{"key": ""}).apiErr(t, 400, "invalid_request")
	c.do(http.MethodPost, "/api/user/topup", map[string]string{"code": codes[2]}).apiErr(t, 400, "invalid_json")
	newClient(t, g).do(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[2]}).apiErr(t, 401, "not_logged_in")
	if got := c.self(); got.Quota+got.UsedQuota != 2_000_000 {
		t.Fatalf("quota after refusals = %d (used %d)", got.Quota, got.UsedQuota)
	}
}

func TestAccountTopupRaceRedeemsOnce(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	clients := []*client{loggedIn(t, g, "r1", 0, "user"), loggedIn(t, g, "r2", 0, "user")}
	for round, code := range makeCodes(t, g, 3, 1_000_000) {
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			successes int
			statuses  []int
		)
		start := make(chan struct{})
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a := clients[i%2].do(http.MethodPost, "/api/user/topup", map[string]string{"key": code})
				mu.Lock()
				defer mu.Unlock()
				statuses = append(statuses, a.status)
				if a.status == 200 {
					successes++
				}
			}()
		}
		close(start)
		wg.Wait()
		if successes != 1 {
			t.Fatalf("round %d: %d successes (statuses %v), want exactly 1", round, successes, statuses)
		}
		for _, s := range statuses {
			if s != 200 && s != 400 {
				t.Fatalf("round %d: status %d among %v", round, s, statuses)
			}
		}
	}
	if total := clients[0].self().Quota + clients[1].self().Quota; total != 3_000_000 {
		t.Fatalf("three codes of 1000000 credited %d in all", total)
	}
}

// inviterWith registers n users with a fresh user's invitation code, each
// of whom then pays, so it has n * 250000 units of invitation quota.
func inviterWith(t *testing.T, g *gatewaytest.Gateway, name string, n int) *client {
	c := loggedIn(t, g, name, 0, "user")
	code := c.self().AffCode
	payments := makeCodes(t, g, n, 1)
	for i := range n {
		guest := newClient(t, g)
		creds := map[string]string{"username": fmt.Sprintf("%s-guest%d", name, i), "password": "long-enough"}
		guest.ok(http.MethodPost, "/api/user/register", map[string]string{"username": creds["username"], "password": creds["password"], "aff_code": code})
		guest.ok(http.MethodPost, "/api/user/login", creds)
		guest.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": payments[i]})
	}
	return c
}

// TestAccountInvitationRewardOnFirstPayment: signups with an invitation
// code mint nothing spendable; each invitee's first payment (a redeemed
// code, or an administrator's credit) pays the inviter's reward, once,
// however many payments race.
func TestAccountInvitationRewardOnFirstPayment(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	inviter := loggedIn(t, g, "host", 0, "user")
	admin := loggedIn(t, g, "boss", 0, "admin")
	code := inviter.self().AffCode
	guests := make([]*client, 3)
	for i := range guests {
		name := fmt.Sprint("guest", i)
		guests[i] = newClient(t, g)
		guests[i].ok(http.MethodPost, "/api/user/register", map[string]string{"username": name, "password": "long-enough", "aff_code": code})
		guests[i].ok(http.MethodPost, "/api/user/login", map[string]string{"username": name, "password": "long-enough"})
	}
	if got := inviter.self(); got.AffQuota != 0 {
		t.Fatalf("three signups alone gave the inviter %d of invitation quota", got.AffQuota)
	}
	inviter.do(http.MethodPost, "/api/user/aff_transfer", struct{}{}).apiErr(t, 400, "invalid_request")

	// four codes redeemed at once by one invitee: one reward
	codes := makeCodes(t, g, 4, 1_000)
	var wg sync.WaitGroup
	for _, c := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a := guests[0].do(http.MethodPost, "/api/user/topup", map[string]string{"key": c}); a.status != 200 {
				t.Errorf("topup: %d %s", a.status, a.body)
			}
		}()
	}
	wg.Wait()
	if got := inviter.self(); got.AffQuota != 250_000 {
		t.Fatalf("after one invitee's payments the inviter has %d, want 250000", got.AffQuota)
	}
	// a refused code is no payment
	guests[1].do(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[0]}).apiErr(t, 400, "invalid_redemption_code")
	// an administrator's credit is a payment
	guestID := guests[1].self().ID
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", guestID), map[string]any{"quota_delta": 10})
	if got := inviter.self(); got.AffQuota != 500_000 {
		t.Fatalf("after an administrator's credit the inviter has %d, want 500000", got.AffQuota)
	}
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", guestID), map[string]any{"quota_delta": 10})
	if got := inviter.self(); got.AffQuota != 500_000 {
		t.Fatalf("a second credit paid again: %d", got.AffQuota)
	}
	var tr transferAnswer
	inviter.ok(http.MethodPost, "/api/user/aff_transfer", struct{}{}).decode(t, &tr)
	if tr != (transferAnswer{Transferred: 500_000, Quota: 500_000, AffQuota: 0}) {
		t.Fatalf("transfer = %+v", tr)
	}
}

type transferAnswer struct {
	Transferred int64 `json:"transferred"`
	Quota       int64 `json:"quota"`
	AffQuota    int64 `json:"aff_quota"`
}

func TestAccountAffTransfer(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := inviterWith(t, g, "inv", 2) // 500000

	var tr transferAnswer
	c.ok(http.MethodPost, "/api/user/aff_transfer", map[string]int64{"quota": 100_000}).decode(t, &tr)
	if tr != (transferAnswer{Transferred: 100_000, Quota: 100_000, AffQuota: 400_000}) {
		t.Fatalf("partial transfer = %+v", tr)
	}
	c.do(http.MethodPost, "/api/user/aff_transfer", map[string]int64{"quota": 400_001}).apiErr(t, 400, "invalid_request")
	c.do(http.MethodPost, "/api/user/aff_transfer", map[string]int64{"quota": 0}).apiErr(t, 400, "invalid_quota")
	c.do(http.MethodPost, "/api/user/aff_transfer", map[string]int64{"quota": -5}).apiErr(t, 400, "invalid_quota")
	c.do(http.MethodPost, "/api/user/aff_transfer", `{"quota":"lots"}`).apiErr(t, 400, "invalid_json")
	c.ok(http.MethodPost, "/api/user/aff_transfer", struct{}{}).decode(t, &tr)
	if tr != (transferAnswer{Transferred: 400_000, Quota: 500_000, AffQuota: 0}) {
		t.Fatalf("transfer of everything = %+v", tr)
	}
	c.do(http.MethodPost, "/api/user/aff_transfer", struct{}{}).apiErr(t, 400, "invalid_request")
	newClient(t, g).do(http.MethodPost, "/api/user/aff_transfer", struct{}{}).apiErr(t, 401, "not_logged_in")
}

func TestAccountAffTransferRace(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := inviterWith(t, g, "racer", 2) // 500000: room for five transfers of 100000
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		successes int
	)
	start := make(chan struct{})
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body := map[string]int64{"quota": 100_000}
			a := c.do(http.MethodPost, "/api/user/aff_transfer", body)
			if a.status != 200 && a.status != 400 {
				t.Errorf("status %d %s", a.status, a.body)
			}
			if a.status == 200 {
				mu.Lock()
				successes++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	u := c.self()
	if successes != 5 || u.Quota != 500_000 || u.AffQuota != 0 {
		t.Fatalf("%d transfers succeeded; quota %d, aff_quota %d; want 5, 500000, 0", successes, u.Quota, u.AffQuota)
	}
}

type apiToken struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	KeyPrefix  string   `json:"key_prefix"`
	Status     string   `json:"status"`
	QuotaLimit int64    `json:"quota_limit"`
	Models     []string `json:"models"`
	ExpiresAt  string   `json:"expires_at"`
	Key        string   `json:"key"`
	Limits     struct {
		RPM         int64 `json:"rpm"`
		TPM         int64 `json:"tpm"`
		MaxParallel int64 `json:"max_parallel"`
	} `json:"limits"`
}

func chatOnce(t *testing.T, g *gatewaytest.Gateway, key, text string) int {
	t.Helper()
	body := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":%q}]}`, text)
	resp, _ := g.Do(http.MethodPost, "/v1/chat/completions", key, []byte(body), nil)
	return resp.StatusCode
}

func TestAccountTokens(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := loggedIn(t, g, "tok", 10_000_000, "user")
	var list struct{ Data []apiToken }
	c.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("new user has tokens: %+v", list)
	}

	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	var created apiToken
	c.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "ci", "quota_limit": 5_000_000,
		"models": []string{"demo"}, "expires_at": expires}).decode(t, &created)
	if !strings.HasPrefix(created.Key, "sk-") || created.Name != "ci" || created.QuotaLimit != 5_000_000 ||
		len(created.Models) != 1 || created.ExpiresAt != expires || !strings.HasPrefix(created.Key, created.KeyPrefix) {
		t.Fatalf("created %+v", created)
	}
	if s := chatOnce(t, g, created.Key, "hello"); s != 200 {
		t.Fatalf("the new key gets %d", s)
	}
	a := c.ok(http.MethodGet, "/api/user/tokens", nil)
	if bytes.Contains(a.body, []byte(created.Key)) {
		t.Fatal("the token list shows the key again")
	}
	a.decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != created.ID || list.Data[0].Key != "" {
		t.Fatalf("list = %+v", list)
	}

	path := fmt.Sprint("/api/user/tokens/", created.ID)
	var upd apiToken
	c.ok(http.MethodPatch, path, map[string]any{"name": "renamed"}).decode(t, &upd)
	if upd.Name != "renamed" || upd.QuotaLimit != 5_000_000 || upd.ExpiresAt != expires {
		t.Fatalf("rename changed more than the name: %+v", upd)
	}
	c.ok(http.MethodPatch, path, map[string]any{"status": "disabled"})
	if s := chatOnce(t, g, created.Key, "hello"); s != 401 {
		t.Fatalf("a disabled key gets %d", s)
	}
	upd = apiToken{}
	c.ok(http.MethodPatch, path, map[string]any{"status": "enabled", "models": []string{}, "expires_at": "", "quota_limit": 0}).decode(t, &upd)
	if upd.Status != "enabled" || len(upd.Models) != 0 || upd.ExpiresAt != "" || upd.QuotaLimit != 0 {
		t.Fatalf("after clearing limits: %+v", upd)
	}
	if s := chatOnce(t, g, created.Key, "hello"); s != 200 {
		t.Fatalf("a re-enabled key gets %d", s)
	}

	for name, tc := range map[string]struct {
		method, path string
		body         any
		status       int
	}{
		"negative quota":  {http.MethodPost, "/api/user/tokens", map[string]any{"quota_limit": -1}, 400},
		"past expiry":     {http.MethodPost, "/api/user/tokens", map[string]any{"expires_at": "2001-01-01T00:00:00Z"}, 400},
		"bad expiry":      {http.MethodPost, "/api/user/tokens", map[string]any{"expires_at": "tomorrow"}, 400},
		"status at birth": {http.MethodPost, "/api/user/tokens", map[string]any{"status": "enabled"}, 400},
		"unknown field":   {http.MethodPost, "/api/user/tokens", map[string]any{"colour": "red"}, 400},
		"bad status":      {http.MethodPatch, path, map[string]any{"status": "paused"}, 400},
		"bad id":          {http.MethodPatch, "/api/user/tokens/abc", map[string]any{}, 400},
		"missing token":   {http.MethodPatch, "/api/user/tokens/99999", map[string]any{}, 404},
		"missing delete":  {http.MethodDelete, "/api/user/tokens/99999", nil, 404},
	} {
		t.Run(name, func(t *testing.T) {
			c.do(tc.method, tc.path, tc.body).apiErr(t, tc.status, "")
		})
	}

	c.ok(http.MethodDelete, path, nil)
	if s := chatOnce(t, g, created.Key, "hello"); s != 401 {
		t.Fatalf("a deleted key gets %d", s)
	}
	c.do(http.MethodDelete, path, nil).apiErr(t, 404, "not_found")
}

type usagePage struct {
	Data []struct {
		ID      int64  `json:"id"`
		UserID  int64  `json:"user_id"`
		Model   string `json:"model"`
		Cost    int64  `json:"cost"`
		TokenID int64  `json:"token_id"`
	} `json:"data"`
	Next string `json:"next_cursor"`
}

func TestAccountUsageAndDailySpend(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := loggedIn(t, g, "user1", 10_000_000, "user")
	key := g.AddToken("user1")
	for i := range 5 {
		if s := chatOnce(t, g, key, fmt.Sprintf("message number %d", i)); s != 200 {
			t.Fatalf("chat: %d", s)
		}
	}
	rows := g.WaitUsage("user1", 5)
	var total int64
	for _, r := range rows {
		total += r.Cost
	}
	if total == 0 {
		t.Fatal("the demo model is priced but cost nothing")
	}

	var seen []int64
	after := ""
	for pages := 0; ; pages++ {
		var p usagePage
		c.ok(http.MethodGet, "/api/user/usage?limit=2&after="+after, nil).decode(t, &p)
		for _, r := range p.Data {
			seen = append(seen, r.ID)
		}
		if p.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		after = p.Next
	}
	if len(seen) != 5 || seen[0] != rows[4].ID || seen[4] != rows[0].ID {
		t.Fatalf("paged ids %v, want newest first of %d rows", seen, len(rows))
	}
	var p usagePage
	c.ok(http.MethodGet, "/api/user/usage?model=other", nil).decode(t, &p)
	if len(p.Data) != 0 {
		t.Fatalf("model filter: %+v", p)
	}
	c.ok(http.MethodGet, "/api/user/usage?model=demo&since="+fmt.Sprint(time.Now().Add(-time.Hour).Unix()), nil).decode(t, &p)
	if len(p.Data) != 5 {
		t.Fatalf("model and since filter: %d rows", len(p.Data))
	}
	c.ok(http.MethodGet, "/api/user/usage?until="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil).decode(t, &p)
	if len(p.Data) != 0 {
		t.Fatalf("until an hour ago: %d rows", len(p.Data))
	}
	for _, q := range []string{"limit=0", "limit=101", "since=yesterday", "after=garbage", "user_id=1"} {
		c.do(http.MethodGet, "/api/user/usage?"+q, nil).apiErr(t, 400, "")
	}

	var daily struct {
		Data []struct {
			Day      string `json:"day"`
			Cost     int64  `json:"cost"`
			Requests int64  `json:"requests"`
		} `json:"data"`
	}
	c.ok(http.MethodGet, "/api/user/usage/daily", nil).decode(t, &daily)
	today := time.Now().UTC().Format(time.DateOnly)
	last := daily.Data[len(daily.Data)-1]
	if len(daily.Data) != 30 || last.Day != today || last.Cost != total || last.Requests != 5 {
		t.Fatalf("daily spend: %d days, last %+v; want 30 days ending %s with cost %d in 5 requests", len(daily.Data), last, today, total)
	}
	c.do(http.MethodGet, "/api/user/usage/daily?days=0", nil).apiErr(t, 400, "invalid_days")
}

func TestAccountCrossUserAccess(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	alice := loggedIn(t, g, "alice", 5_000_000, "user")
	mallory := loggedIn(t, g, "mallory", 0, "user")
	var tok apiToken
	alice.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "alices"}).decode(t, &tok)
	if s := chatOnce(t, g, tok.Key, "private words"); s != 200 {
		t.Fatalf("chat: %d", s)
	}
	g.WaitUsage("alice", 1)
	path := fmt.Sprint("/api/user/tokens/", tok.ID)

	// another user's token is "not found", exactly as a missing one
	missing := mallory.do(http.MethodPatch, "/api/user/tokens/99999", map[string]any{"name": "x"}).apiErr(t, 404, "not_found")
	if m := mallory.do(http.MethodPatch, path, map[string]any{"name": "mine"}).apiErr(t, 404, "not_found"); m != missing {
		t.Fatalf("another's token answers %q, a missing one %q", m, missing)
	}
	mallory.do(http.MethodPatch, path, map[string]any{"status": "disabled"}).apiErr(t, 404, "not_found")
	mallory.do(http.MethodDelete, path, nil).apiErr(t, 404, "not_found")
	var list struct{ Data []apiToken }
	mallory.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("mallory sees tokens: %+v", list.Data)
	}
	var p usagePage
	mallory.ok(http.MethodGet, "/api/user/usage", nil).decode(t, &p)
	if len(p.Data) != 0 {
		t.Fatalf("mallory sees usage: %+v", p.Data)
	}
	mallory.do(http.MethodGet, fmt.Sprint("/api/user/usage?user_id=", alice.self().ID), nil).apiErr(t, 400, "")
	var daily struct{ Data []struct{ Cost int64 } }
	mallory.ok(http.MethodGet, "/api/user/usage/daily", nil).decode(t, &daily)
	for _, d := range daily.Data {
		if d.Cost != 0 {
			t.Fatalf("mallory's chart shows spend: %+v", daily.Data)
		}
	}
	// a topup and a transfer act on the caller only
	code := makeCodes(t, g, 1, 7)[0]
	mallory.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": code})
	mallory.do(http.MethodPost, "/api/user/aff_transfer", struct{}{}).apiErr(t, 400, "")
	if a, m := alice.self(), mallory.self(); a.Quota == 5_000_007 || m.Quota != 7 {
		t.Fatalf("alice %d, mallory %d after mallory's topup", a.Quota, m.Quota)
	}
	// admin endpoints
	for _, ep := range [][2]string{{"GET", "/api/admin/users"}, {"POST", "/api/admin/users"}, {"PATCH", "/api/admin/users/1"},
		{"GET", "/api/admin/codes"}, {"POST", "/api/admin/codes"}, {"PATCH", "/api/admin/codes/1"}, {"GET", "/api/admin/usage"}} {
		mallory.do(ep[0], ep[1], map[string]any{}).apiErr(t, 403, "admin_only")
	}
	// alice's token still intact
	alice.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "alices" || list.Data[0].Status != "enabled" {
		t.Fatalf("alice's tokens after mallory's attempts: %+v", list.Data)
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
	// a key needs no Origin: it cannot be sent by another site's page
	keyed := newClient(t, g)
	keyed.origin = ""
	keyed.bearer = g.AddToken("victim")
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
	// but a guesser spread over many addresses is slowed: with the name's
	// failures over the limit, each address that fails at it gets no
	// second attempt, not even with the right password
	for i := range 3 {
		spread := newClient(t, g)
		spread.from = fmt.Sprint("10.0.3.", i)
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

// TestAccountRegistrationRateLimit: accounts registered from one IPv4
// address, or from anywhere in one IPv6 /64, are limited on their own
// (registration_rate_limit), however generous the attempt limit; a refused
// signup does not count.
func TestAccountRegistrationRateLimit(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("on", 1000, 2).String(), nil)
	register := func(from, name string) apiAnswer {
		c := newClient(t, g)
		c.from = from
		return c.do(http.MethodPost, "/api/user/register", map[string]string{"username": name, "password": "long-enough"})
	}
	for _, tc := range []struct{ first, second, third, other string }{
		{"10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2"},
		{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:3::1"},
	} {
		if a := register(tc.first, "u-"+tc.first); a.status != 200 {
			t.Fatalf("first signup from %s: %d %s", tc.first, a.status, a.body)
		}
		register(tc.first, "u-"+tc.first).apiErr(t, 400, "invalid_request") // taken: not counted
		if a := register(tc.second, "u2-"+tc.second); a.status != 200 {
			t.Fatalf("second signup from %s: %d %s", tc.second, a.status, a.body)
		}
		a := register(tc.third, "u3-"+tc.third)
		if msg := a.apiErr(t, 429, "rate_limited"); !strings.Contains(msg, "registered") || a.header.Get("Retry-After") == "" {
			t.Fatalf("third signup from %s: %q, Retry-After %q", tc.third, msg, a.header.Get("Retry-After"))
		}
		if a := register(tc.other, "u-"+tc.other); a.status != 200 {
			t.Fatalf("signup from another network %s: %d %s", tc.other, a.status, a.body)
		}
	}
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

func TestAccountAdmin(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	admin := loggedIn(t, g, "boss", 0, "admin")
	user := loggedIn(t, g, "worker", 0, "user")
	other := loggedIn(t, g, "peer", 0, "admin")
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})

	var users struct {
		Data []apiUser
		Next string `json:"next_cursor"`
	}
	admin.ok(http.MethodGet, "/api/admin/users", nil).decode(t, &users)
	if len(users.Data) != 4 || users.Data[0].Username != "root" {
		t.Fatalf("users: %+v", users.Data)
	}
	workerID := user.self().ID

	var made apiUser
	admin.ok(http.MethodPost, "/api/admin/users", map[string]any{"username": "hired", "password": "long-enough", "quota": 42}).decode(t, &made)
	if made.Role != "user" || made.Quota != 42 {
		t.Fatalf("created %+v", made)
	}
	admin.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "hired", "password": "long-enough"}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "x2", "password": "long-enough", "role": "admin"}).apiErr(t, 403, "role_not_allowed")
	root.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "x3", "password": "long-enough", "role": "root"}).apiErr(t, 403, "role_not_allowed")
	root.ok(http.MethodPost, "/api/admin/users", map[string]any{"username": "deputy", "password": "long-enough", "role": "admin"})

	workerPath := fmt.Sprint("/api/admin/users/", workerID)
	var changed apiUser
	admin.ok(http.MethodPatch, workerPath, map[string]any{"quota_delta": 3_000_000}).decode(t, &changed)
	if changed.Quota != 3_000_000 {
		t.Fatalf("after adjust: %+v", changed)
	}
	admin.do(http.MethodPatch, workerPath, map[string]any{"quota_delta": -3_000_001}).apiErr(t, 400, "invalid_quota")
	admin.do(http.MethodPatch, workerPath, map[string]any{"role": "admin"}).apiErr(t, 403, "role_not_allowed")
	admin.do(http.MethodPatch, workerPath, map[string]any{"status": "sleeping"}).apiErr(t, 400, "invalid_status")
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", other.self().ID), map[string]any{"status": "disabled"}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", admin.self().ID), map[string]any{"status": "disabled"}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, "/api/admin/users/1", map[string]any{"quota_delta": 5}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, "/api/admin/users/99999", map[string]any{"quota_delta": 5}).apiErr(t, 404, "not_found")

	// disabling logs the user out and keeps them out
	admin.ok(http.MethodPatch, workerPath, map[string]any{"status": "disabled"})
	user.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "worker", "password": "password-worker"}).
		apiErr(t, 401, "invalid_credentials")
	admin.ok(http.MethodPatch, workerPath, map[string]any{"status": "enabled"})
	user.login("worker")

	root.ok(http.MethodPatch, workerPath, map[string]any{"role": "admin"}).decode(t, &changed)
	if changed.Role != "admin" {
		t.Fatalf("root's promotion: %+v", changed)
	}
	root.ok(http.MethodPatch, workerPath, map[string]any{"role": "user"})
	// a role change ends the user's sessions
	user.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	user.login("worker")

	// codes
	var codes struct {
		Data []struct {
			ID        int64  `json:"id"`
			Code      string `json:"code"`
			Quota     int64  `json:"quota"`
			Status    string `json:"status"`
			ExpiresAt string `json:"expires_at"`
			UsedBy    int64  `json:"used_by"`
		}
		Next string `json:"next_cursor"`
	}
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	admin.ok(http.MethodPost, "/api/admin/codes", map[string]any{"count": 3, "quota": 1_000, "expires_at": expires}).decode(t, &codes)
	if len(codes.Data) != 3 || codes.Data[0].Quota != 1_000 || codes.Data[0].ExpiresAt != expires || len(codes.Data[0].Code) < 20 {
		t.Fatalf("created codes %+v", codes.Data)
	}
	first, second := codes.Data[0], codes.Data[1]
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"count": 1, "quota": 0}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"count": 10001, "quota": 1}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"quota": 1, "expires_at": "2000-01-01T00:00:00Z"}).apiErr(t, 400, "invalid_request")
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/codes/", first.ID), map[string]any{"status": "disabled"})
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/codes/", first.ID), map[string]any{"status": "gone"}).apiErr(t, 400, "invalid_status")
	admin.do(http.MethodPatch, "/api/admin/codes/99999", map[string]any{"status": "disabled"}).apiErr(t, 404, "not_found")
	user.do(http.MethodPost, "/api/user/topup", map[string]string{"key": first.Code}).apiErr(t, 400, "invalid_redemption_code")
	user.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": second.Code})
	admin.ok(http.MethodGet, "/api/admin/codes", nil).decode(t, &codes)
	states := map[int64]string{}
	for _, c := range codes.Data {
		states[c.ID] = fmt.Sprint(c.Status, c.UsedBy != 0)
	}
	if states[first.ID] != "disabledfalse" || states[second.ID] != "enabledtrue" {
		t.Fatalf("code states %v", states)
	}

	// all usage, and one user's
	if s := chatOnce(t, g, g.AddToken("worker"), "w"); s != 200 {
		t.Fatal(s)
	}
	if s := chatOnce(t, g, g.AddToken("peer", "--name", "p"), "p"); s == 0 {
		t.Fatal(s)
	}
	g.WaitUsage("worker", 1)
	g.WaitUsage("peer", 1)
	var all usagePage
	admin.ok(http.MethodGet, "/api/admin/usage", nil).decode(t, &all)
	if len(all.Data) != 2 {
		t.Fatalf("all usage: %+v", all.Data)
	}
	admin.ok(http.MethodGet, fmt.Sprint("/api/admin/usage?user_id=", workerID), nil).decode(t, &all)
	if len(all.Data) != 1 || all.Data[0].UserID != workerID {
		t.Fatalf("worker's usage: %+v", all.Data)
	}
	admin.do(http.MethodGet, "/api/admin/usage?user_id=x", nil).apiErr(t, 400, "invalid_user_id")
}

// TestAccountAdminSetsLimits: an administrator sets a key's and a user's
// rate limits through the account API; they hold on the next request, the
// owner sees them, 0 clears one, and nobody else can set them.
func TestAccountAdminSetsLimits(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	admin := loggedIn(t, g, "boss", 0, "admin")
	user := loggedIn(t, g, "capped", 10_000_000, "user")
	key := g.AddToken("capped", "--name", "first")
	other := g.AddToken("capped", "--name", "second")

	var own struct{ Data []apiToken }
	user.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &own)
	var firstID int64
	for _, tk := range own.Data {
		if tk.Name == "first" {
			firstID = tk.ID
		}
	}
	if firstID == 0 {
		t.Fatalf("tokens: %+v", own.Data)
	}
	tokenPath := fmt.Sprint("/api/admin/tokens/", firstID)

	// a user cannot lift, or set, limits; bad values are refused
	user.do(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": 1000}}).apiErr(t, 403, "")
	admin.do(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": -1}}).apiErr(t, 400, "invalid_limits")
	admin.do(http.MethodPatch, tokenPath, map[string]any{}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPatch, "/api/admin/tokens/99999", map[string]any{"limits": map[string]any{"rpm": 1}}).apiErr(t, 404, "not_found")
	rootKey := g.AddToken("root", "--name", "root-key")
	var rootTokens struct{ Data []apiToken }
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})
	root.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &rootTokens)
	if len(rootTokens.Data) != 1 || rootKey == "" {
		t.Fatalf("root's tokens: %+v", rootTokens.Data)
	}
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/tokens/", rootTokens.Data[0].ID), map[string]any{"limits": map[string]any{"rpm": 1}}).apiErr(t, 403, "not_allowed")

	var set apiToken
	admin.ok(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": 2, "tpm": 1_000_000}}).decode(t, &set)
	if set.Limits.RPM != 2 || set.Limits.TPM != 1_000_000 || set.Limits.MaxParallel != 0 {
		t.Fatalf("set limits answer: %+v", set.Limits)
	}
	user.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &own)
	for _, tk := range own.Data {
		if tk.ID == firstID && tk.Limits.RPM != 2 {
			t.Fatalf("the owner sees %+v", tk.Limits)
		}
	}
	// the cache was told: the very next requests are limited
	for i, want := range []int{200, 200, 429} {
		if s := chatOnce(t, g, key, "x"); s != want {
			t.Fatalf("request %d on a 2 rpm key: %d, want %d", i+1, s, want)
		}
	}
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("the user's other key is not limited, got %d", s)
	}

	// a user's limit holds over all of their keys
	var u apiUser
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"rpm": 3}}).decode(t, &u)
	var withLimits struct {
		Limits struct{ RPM int64 } `json:"limits"`
	}
	user.ok(http.MethodGet, "/api/user/self", nil).decode(t, &withLimits)
	if withLimits.Limits.RPM != 3 {
		t.Fatalf("the user sees limits %+v", withLimits.Limits)
	}
	// counted from when the limit is set, over both keys
	for i, k := range []string{other, other, key} {
		if i == 2 {
			// the first key's own 2 rpm still holds
			if s := chatOnce(t, g, k, "x"); s != 429 {
				t.Fatalf("first key, over its own rpm: %d", s)
			}
			continue
		}
		if s := chatOnce(t, g, k, "x"); s != 200 {
			t.Fatalf("request %d under the user's 3 rpm: %d", i+1, s)
		}
	}
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("third request under the user's 3 rpm: %d", s)
	}
	if s := chatOnce(t, g, other, "x"); s != 429 {
		t.Fatalf("over the user's 3 rpm: %d", s)
	}
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"max_parallel": -2}}).apiErr(t, 400, "invalid_limits")
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"rpm": 0}})
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("after clearing the user's rpm: %d", s)
	}
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

// TestRedeemAddRefusesRateLimits: a redemption code adds quota only, so
// `redeem add` refuses --rpm, --tpm and --max-parallel (it once took and
// ignored them) with where limits are set, creates no code, and its help
// no longer offers them.
func TestRedeemAddRefusesRateLimits(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	ctx := context.Background()
	for _, flag := range []string{"--rpm", "--tpm", "--max-parallel"} {
		out, errOut, err := g.TryCLI("redeem", "add", "--quota", "1000", flag, "5")
		if err == nil || strings.TrimSpace(out) != "" || !strings.Contains(errOut, "adds quota only") || !strings.Contains(errOut, "caddy gateway user set") {
			t.Errorf("redeem add %s 5: err %v, stdout %q, stderr %q; want a refusal naming user set", flag, err, out, errOut)
		}
	}
	if codes, err := g.Store().ListRedemptionCodes(ctx, store.CodeFilter{Limit: 10}); err != nil || len(codes) != 0 {
		t.Fatalf("codes after refusals: %d (%v), want none", len(codes), err)
	}
	help, _, err := g.TryCLI("redeem", "add", "--help")
	if err != nil || !strings.Contains(help, "--quota") || strings.Contains(help, "--rpm") || strings.Contains(help, "--max-parallel") {
		t.Fatalf("redeem add --help (%v):\n%s", err, help)
	}
	if codes := makeCodes(t, g, 2, 1000); len(codes) != 2 {
		t.Fatalf("redeem add printed %v, want two codes", codes)
	}
}

// TestAccountDatabaseFilesPrivate starts the gateway on a database path
// whose directory does not exist yet: the directory is made 0700, and the
// database and its WAL files, which hold password and key hashes and
// redemption codes, 0600 whatever the umask lets through.
func TestAccountDatabaseFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh", "data")
	db := filepath.Join(dir, "gateway.db")
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).withDatabase(db).String(), nil)
	// a write, so the WAL and its index are in use
	loggedIn(t, g, "owner", 0, "user")

	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("database directory is %v, want -rwx------", perm)
	}
	for _, name := range []string{"gateway.db", "gateway.db-wal", "gateway.db-shm", "gateway.db-journal"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name == "gateway.db-journal" {
			continue // WAL mode needs no rollback journal; if one appears, it must be private too
		}
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s is %v, want -rw-------", name, perm)
		}
	}
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
	keyed.bearer = g.AddToken("pat")
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
