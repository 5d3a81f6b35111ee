package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// A user's own tokens and usage through the account API, and what one
// user cannot see or touch of another's.

type apiToken struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	KeyPrefix  string   `json:"key_prefix"`
	Status     string   `json:"status"`
	QuotaLimit int64    `json:"quota_limit"`
	Models     []string `json:"models"`
	ExpiresAt  string   `json:"expires_at"`
	Key        string   `json:"key"`
	Management bool     `json:"management"`
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

// TestAccountKeysReachModelsOnly: a key reaches the model endpoints, not
// the account or admin API, an administrator's neither; a management key,
// made by a signed-in user, does, and makes or changes no key wider than
// itself: a key handed out with a quota, a model list and an expiry
// cannot mint an unlimited key or lift its own limits.
func TestAccountKeysReachModelsOnly(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	c := loggedIn(t, g, "owner", 10_000_000, "user")
	plain := newClient(t, g)
	plain.bearer = g.AddToken("owner")
	if s := chatOnce(t, g, plain.bearer, "hello"); s != 200 {
		t.Fatalf("a plain key on a model endpoint: %d", s)
	}
	for _, ep := range []struct {
		method, path string
		body         any
	}{{"GET", "/api/user/self", nil}, {"GET", "/api/user/tokens", nil}, {"POST", "/api/user/tokens", map[string]any{}},
		{"PATCH", "/api/user/tokens/1", map[string]any{"quota_limit": 0}}, {"POST", "/api/user/topup", map[string]any{"key": "x"}},
		{"POST", "/api/user/aff_transfer", map[string]any{}}, {"GET", "/api/user/usage", nil}} {
		plain.do(ep.method, ep.path, ep.body).apiErr(t, 403, "management_key_required")
	}
	admin := loggedIn(t, g, "boss", 0, "admin")
	adminKey := newClient(t, g)
	adminKey.bearer = g.AddToken("boss")
	adminKey.do(http.MethodGet, "/api/admin/users", nil).apiErr(t, 403, "management_key_required")
	// the administrator's own management key, made while signed in, does
	var adminMgmt apiToken
	admin.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "ops", "management": true}).decode(t, &adminMgmt)
	adminKey.bearer = adminMgmt.Key
	adminKey.ok(http.MethodGet, "/api/admin/users", nil)

	// a limited management key, made by the signed-in owner
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var mgmt apiToken
	c.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "script", "management": true, "quota_limit": 1_000_000,
		"models": []string{"demo"}, "expires_at": expires.Format(time.RFC3339)}).decode(t, &mgmt)
	if !mgmt.Management {
		t.Fatalf("created %+v", mgmt)
	}
	k := newClient(t, g)
	k.origin = ""
	k.bearer = mgmt.Key
	if u := k.self(); u.Username != "owner" {
		t.Fatalf("self by the management key: %+v", u)
	}
	soon := expires.Add(-time.Minute).Format(time.RFC3339)
	for name, body := range map[string]map[string]any{
		"unlimited":      {"name": "wide"},
		"more quota":     {"quota_limit": 2_000_000, "models": []string{"demo"}, "expires_at": soon},
		"every model":    {"quota_limit": 1_000, "expires_at": soon},
		"no expiry":      {"quota_limit": 1_000, "models": []string{"demo"}},
		"later expiry":   {"quota_limit": 1_000, "models": []string{"demo"}, "expires_at": expires.Add(time.Hour).Format(time.RFC3339)},
		"management key": {"quota_limit": 1_000, "models": []string{"demo"}, "expires_at": soon, "management": true},
	} {
		if a := k.do(http.MethodPost, "/api/user/tokens", body); a.status != 403 {
			t.Errorf("%s: %d %s, want 403", name, a.status, a.body)
		} else {
			a.apiErr(t, 403, "key_too_wide")
		}
	}
	var child apiToken
	k.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "child", "quota_limit": 500_000,
		"models": []string{"demo"}, "expires_at": soon}).decode(t, &child)
	if child.Management || child.QuotaLimit != 500_000 {
		t.Fatalf("child %+v", child)
	}
	if s := chatOnce(t, g, child.Key, "hello"); s != 200 {
		t.Fatalf("the child key on a model endpoint: %d", s)
	}
	// the child's limit came out of the management key's, so its keys
	// together cannot spend more than it could: another 500000 is refused
	var list struct{ Data []apiToken }
	c.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &list)
	for _, tok := range list.Data {
		if tok.ID == mgmt.ID && tok.QuotaLimit != 500_000 {
			t.Fatalf("the management key's limit after making a key of 500000: %d, want 500000", tok.QuotaLimit)
		}
	}
	k.do(http.MethodPost, "/api/user/tokens", map[string]any{"name": "second", "quota_limit": 500_000,
		"models": []string{"demo"}, "expires_at": soon}).apiErr(t, 403, "key_too_wide")
	k.do(http.MethodPatch, fmt.Sprint("/api/user/tokens/", child.ID), map[string]any{"quota_limit": 600_000}).apiErr(t, 403, "key_too_wide")
	k.ok(http.MethodDelete, fmt.Sprint("/api/user/tokens/", child.ID), nil)
	// it cannot lift its own limits, only narrow them
	self := fmt.Sprint("/api/user/tokens/", mgmt.ID)
	for _, body := range []map[string]any{{"quota_limit": 0}, {"quota_limit": 500_001}, {"models": []string{}}, {"expires_at": ""}} {
		k.do(http.MethodPatch, self, body).apiErr(t, 403, "key_too_wide")
	}
	var narrowed apiToken
	k.ok(http.MethodPatch, self, map[string]any{"quota_limit": 400_000}).decode(t, &narrowed)
	if narrowed.QuotaLimit != 400_000 {
		t.Fatalf("narrowed %+v", narrowed)
	}
	// nor change or delete a wider key of its owner's
	var wide apiToken
	c.ok(http.MethodPost, "/api/user/tokens", map[string]any{"name": "wide"}).decode(t, &wide)
	widePath := fmt.Sprint("/api/user/tokens/", wide.ID)
	k.do(http.MethodPatch, widePath, map[string]any{"name": "mine now"}).apiErr(t, 403, "key_too_wide")
	k.do(http.MethodDelete, widePath, nil).apiErr(t, 403, "key_too_wide")
	// whether a key is a management key is fixed when it is made
	c.do(http.MethodPatch, widePath, map[string]any{"management": true}).apiErr(t, 400, "invalid_request")
}
