package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Registration policy and invitations: open or closed signups, their rate
// limit, invitation codes and the inviter's reward, and moving that reward
// to the spendable quota.

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
	// a code worth a unit is no payment that earns the inviter $0.25: the
	// reward is owed on a payment of at least the reward
	c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 1)[0]})
	c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 249_999)[0]})
	if got := inviter.self(); got.AffQuota != 0 {
		t.Fatalf("inviter's aff_quota = %d after the invitee paid 1 and 249999 units, want 0", got.AffQuota)
	}
	c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 250_000)[0]})
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

// inviterWith registers n users with a fresh user's invitation code, each
// of whom then pays, so it has n * 250000 units of invitation quota.
func inviterWith(t *testing.T, g *gatewaytest.Gateway, name string, n int) *client {
	c := loggedIn(t, g, name, 0, "user")
	code := c.self().AffCode
	payments := makeCodes(t, g, n, 250_000)
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
	codes := makeCodes(t, g, 4, 250_000)
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
	// an administrator's credit is a payment, once it is the reward's worth
	guestID := guests[1].self().ID
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", guestID), map[string]any{"quota_delta": 10})
	if got := inviter.self(); got.AffQuota != 250_000 {
		t.Fatalf("after an administrator's credit of 10 units the inviter has %d, want 250000", got.AffQuota)
	}
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", guestID), map[string]any{"quota_delta": 250_000})
	if got := inviter.self(); got.AffQuota != 500_000 {
		t.Fatalf("after an administrator's credit the inviter has %d, want 500000", got.AffQuota)
	}
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", guestID), map[string]any{"quota_delta": 250_000})
	if got := inviter.self(); got.AffQuota != 500_000 {
		t.Fatalf("a second credit paid again: %d", got.AffQuota)
	}
	var tr transferAnswer
	inviter.ok(http.MethodPost, "/api/user/aff_transfer", struct{}{}).decode(t, &tr)
	if tr != (transferAnswer{Transferred: 500_000, Quota: 500_000, AffQuota: 0}) {
		t.Fatalf("transfer = %+v", tr)
	}
}

// TestAccountInvitationMinimumPayment: invitation_min_payment sets the
// payment that pays the reward, below or above the reward itself.
func TestAccountInvitationMinimumPayment(t *testing.T) {
	g := gatewaytest.Start(t, accountConfig("on", 1000, 1000).option("invitation_min_payment 1000000").String(), nil)
	inviter := loggedIn(t, g, "host", 0, "user")
	guest := newClient(t, g)
	creds := map[string]string{"username": "guest", "password": "long-enough"}
	guest.ok(http.MethodPost, "/api/user/register", map[string]string{"username": "guest", "password": "long-enough", "aff_code": inviter.self().AffCode})
	guest.ok(http.MethodPost, "/api/user/login", creds)
	guest.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 999_999)[0]})
	if got := inviter.self(); got.AffQuota != 0 {
		t.Fatalf("a payment under invitation_min_payment paid %d", got.AffQuota)
	}
	guest.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": makeCodes(t, g, 1, 1_000_000)[0]})
	if got := inviter.self(); got.AffQuota != 250_000 {
		t.Fatalf("a payment of invitation_min_payment paid %d, want 250000", got.AffQuota)
	}
}

// TestAccountRegistrationRefusesLookalikes: with registration on beside
// single sign-on, nobody registers an address of an SSO domain (which
// would block that person's first sign-in), in any case; and no one takes
// a name that reads as a taken one: "Root", "ROOT", "ｒｏｏｔ" and "rооt"
// (Cyrillic о) beside root, by signup or by an administrator.
func TestAccountRegistrationRefusesLookalikes(t *testing.T) {
	t.Setenv(ssoSecretEnv, "oidc-client-secret-unused")
	g := gatewaytest.Start(t, ssoConfig("https://idp.invalid").option("registration on").String(), nil)
	register := func(name string) apiAnswer {
		return newClient(t, g).do(http.MethodPost, "/api/user/register", map[string]string{"username": name, "password": "long-enough"})
	}
	for _, name := range []string{"alice@a.example", "Alice@A.Example", "bob@B.EXAMPLE", "dan@ａ.example"} { // the last fullwidth
		if msg := register(name).apiErr(t, 400, "sso_username"); !strings.Contains(msg, "single sign-on") {
			t.Errorf("%s refused with %q", name, msg)
		}
	}
	newClient(t, g).ok(http.MethodPost, "/api/user/register", map[string]string{"username": "carol@elsewhere.example", "password": "long-enough"})

	for _, name := range []string{"Root", "ROOT", "ｒｏｏｔ", "rооt", "rοοt"} { // fullwidth, Cyrillic о, Greek ο
		register(name).apiErr(t, 400, "invalid_request")
	}
	if msg := register("rооt-admin").apiErr(t, 400, "invalid_request"); !strings.Contains(msg, "Latin and Cyrillic") {
		t.Errorf("a mixed-script name refused with %q", msg)
	}
	newClient(t, g).ok(http.MethodPost, "/api/user/register", map[string]string{"username": "пётр", "password": "long-enough"})
	register("ПЁТР").apiErr(t, 400, "invalid_request")
	register("eve@а.example").apiErr(t, 400, "invalid_request") // a Cyrillic а: mixed, refused before its domain is looked at
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})
	root.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "Carol@Elsewhere.example", "password": "long-enough"}).apiErr(t, 400, "invalid_request")
	if _, _, err := g.TryCLI("user", "add", "--username", "ROOT", "--password", "long-enough"); err == nil {
		t.Fatal("the CLI added ROOT beside root")
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
