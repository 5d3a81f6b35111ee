package accountapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

// operatorAPI is an API with two channels, a tester that records what it
// was asked, an administrator "boss" logged in, and users ann and bob.
type operatorAPI struct {
	h      *accountapi.Handler
	st     store.Store
	cookie *http.Cookie
	tested []string
	ann    *store.User
	bob    *store.User
}

func newOperatorAPI(t *testing.T) *operatorAPI {
	t.Helper()
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := &operatorAPI{st: st}
	mk := func(name, role string) *store.User {
		u, err := account.CreateUser(context.Background(), st, account.Operator, account.NewUser{Username: name, Password: "password-" + name, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	mk("boss", store.RoleAdmin)
	o.ann, o.bob = mk("ann", store.RoleUser), mk("bob", store.RoleUser)
	price := &billing.Price{Input: 150000, Output: 600000}
	o.h = accountapi.New(accountapi.Config{
		Store: st, Keys: keys.NewCache(st, time.Second), Ledger: billing.NewLedger(),
		Gate:     account.NewGate(st, account.GateConfig{}),
		Sessions: &accountapi.Sessions{Logins: account.Sessions{Store: st}},
		Models:   func() []accountapi.Model { return []accountapi.Model{{ID: "m", Chat: true, Price: price}} },
		Channels: func() []routing.ChannelState {
			return []routing.ChannelState{{Name: "up1", Type: "openai", Models: []string{"m", "unpriced"}},
				{Name: "up2", Type: "openai", Models: []string{"m"}, Ejected: true, ConsecutiveFailures: 5}}
		},
		TestChannel: func(_ context.Context, channel, model string) (*accountapi.ChannelTest, error) {
			o.tested = append(o.tested, channel+"/"+model)
			if channel != "up1" {
				return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "there is no channel %q", channel)
			}
			return &accountapi.ChannelTest{Channel: channel, Model: "m", OK: true, Status: 200, LatencyMS: 12}, nil
		},
	})
	w := do(o.h, "POST", "/api/user/login", `{"username":"boss","password":"password-boss"}`, nil)
	o.cookie = w.Result().Cookies()[0]
	return o
}

func (o *operatorAPI) send(t *testing.T, method, path, body string, out any) *httptest.ResponseRecorder {
	t.Helper()
	w := do(o.h, method, path, body, func(r *http.Request) { r.AddCookie(o.cookie) })
	if out != nil {
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// settle writes usage rows, the newest last.
func (o *operatorAPI) settle(t *testing.T, rows ...*store.UsageLog) {
	t.Helper()
	base := time.Now().Add(-time.Minute)
	for i, r := range rows {
		r.Key = fmt.Sprintf("k%d-%d", time.Now().UnixNano(), i)
		if r.CreatedAt.IsZero() {
			r.CreatedAt = base.Add(time.Duration(i) * time.Millisecond)
		}
	}
	if err := o.st.SettleBatch(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// TestAdminUsageSieve: the admin usage log filters by key, channel,
// status and request id, pages through what matches, and says how far
// back it looked when a filter matches little.
func TestAdminUsageSieve(t *testing.T) {
	o := newOperatorAPI(t)
	var rows []*store.UsageLog
	for i := range 30 {
		r := &store.UsageLog{UserID: o.ann.ID, TokenID: int64(1 + i%3), Model: "m", Channel: []string{"up1", "up2"}[i%2], Status: 200,
			RequestID: fmt.Sprintf("req-%d", i), UpstreamRequestID: fmt.Sprintf("up-%d", i)}
		if i%5 == 0 {
			r.Status, r.Error = 429, "rate limited"
		}
		rows = append(rows, r)
	}
	o.settle(t, rows...)
	list := func(q url.Values) (out struct {
		Data []struct {
			TokenID   int64 `json:"token_id"`
			Channel   string
			Status    int
			RequestID string `json:"request_id"`
		}
		NextCursor string `json:"next_cursor"`
	}) {
		t.Helper()
		o.send(t, "GET", "/api/admin/usage?"+q.Encode(), "", &out)
		return out
	}
	// key 2 on up1: rows 4, 10, 16, 22, 28 (i%3==1 and i%2==0), in pages of 2
	var seen []string
	q := url.Values{"token_id": {"2"}, "channel": {"up1"}, "limit": {"2"}}
	for {
		page := list(q)
		for _, d := range page.Data {
			if d.TokenID != 2 || d.Channel != "up1" {
				t.Fatalf("a row that does not match: %+v", d)
			}
			seen = append(seen, d.RequestID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Set("after", page.NextCursor)
	}
	if strings.Join(seen, ",") != "req-28,req-22,req-16,req-10,req-4" {
		t.Fatalf("key 2 on up1, newest first: %v", seen)
	}
	if got := list(url.Values{"status": {"error"}}); len(got.Data) != 6 || got.Data[0].Status != 429 {
		t.Fatalf("errors: %+v", got)
	}
	if got := list(url.Values{"status": {"429"}, "limit": {"100"}}); len(got.Data) != 6 || got.NextCursor != "" {
		t.Fatalf("status 429: %+v", got)
	}
	if got := list(url.Values{"status": {"ok"}, "limit": {"100"}}); len(got.Data) != 24 {
		t.Fatalf("status ok: %d rows", len(got.Data))
	}
	for _, id := range []string{"req-7", "up-7"} {
		if got := list(url.Values{"request_id": {id}}); len(got.Data) != 1 || got.Data[0].RequestID != "req-7" {
			t.Fatalf("request id %s: %+v", id, got)
		}
	}
	if got := list(url.Values{"channel": {"nope"}}); len(got.Data) != 0 || got.NextCursor != "" {
		t.Fatalf("a channel with no rows: %+v", got)
	}
	for _, bad := range []string{"status=20", "status=fine", "token_id=x"} {
		if w := o.send(t, "GET", "/api/admin/usage?"+bad, "", nil); w.Code != 400 {
			t.Fatalf("%s: %d", bad, w.Code)
		}
	}
}

// TestAdminUsageFilterReachesOldRows: the store filters, so a row that
// matches far behind thousands that do not is found in the first answer.
func TestAdminUsageFilterReachesOldRows(t *testing.T) {
	o := newOperatorAPI(t)
	base := time.Now().Add(-time.Hour)
	var rows []*store.UsageLog
	for i := range 10500 {
		rows = append(rows, &store.UsageLog{UserID: o.ann.ID, Model: "m", Channel: "up1", Status: 200, CreatedAt: base.Add(time.Duration(i) * time.Millisecond)})
	}
	rows[0].Channel = "rare"
	o.settle(t, rows...)
	var first struct {
		Data []struct {
			Channel string
		}
		NextCursor string `json:"next_cursor"`
	}
	o.send(t, "GET", "/api/admin/usage?channel=rare", "", &first)
	if len(first.Data) != 1 || first.Data[0].Channel != "rare" || first.NextCursor != "" {
		t.Fatalf("the answer: %+v", first)
	}
}

// TestAdminChannels: each channel's health with its models' prices and
// its recent traffic from the usage rows; the test endpoint passes the
// channel and model on and answers a refusal in the API's shape.
func TestAdminChannels(t *testing.T) {
	o := newOperatorAPI(t)
	o.settle(t,
		&store.UsageLog{UserID: o.ann.ID, Model: "m", Channel: "up1", Status: 200, LatencyMS: 100, TTFBMS: 10},
		&store.UsageLog{UserID: o.ann.ID, Model: "m", Channel: "up1", Status: 502, LatencyMS: 300, TTFBMS: 30, Error: "older failure"},
		&store.UsageLog{UserID: o.ann.ID, Model: "m", Channel: "up1", Status: 503, LatencyMS: 200, TTFBMS: 20, Error: "newest failure"},
	)
	var out struct {
		Data []struct {
			Name    string
			Ejected bool
			Prices  map[string]map[string]any
			Recent  struct {
				Requests     int64
				Errors       int64
				AvgLatencyMS int64  `json:"avg_latency_ms"`
				AvgTTFBMS    int64  `json:"avg_ttfb_ms"`
				LastError    string `json:"last_error"`
				LastStatus   int    `json:"last_error_status"`
			}
		}
		Since string
	}
	o.send(t, "GET", "/api/admin/channels", "", &out)
	if len(out.Data) != 2 || out.Since == "" {
		t.Fatalf("channels: %+v", out)
	}
	up1, up2 := out.Data[0], out.Data[1]
	if up1.Prices["m"]["input"] != 150000.0 || len(up1.Prices) != 1 || !up2.Ejected {
		t.Fatalf("prices or health: %+v", out.Data)
	}
	if r := up1.Recent; r.Requests != 3 || r.Errors != 2 || r.AvgLatencyMS != 200 || r.AvgTTFBMS != 20 || r.LastError != "newest failure" || r.LastStatus != 503 {
		t.Fatalf("up1's recent traffic: %+v", r)
	}
	if up2.Recent.Requests != 0 {
		t.Fatalf("up2's recent traffic: %+v", up2.Recent)
	}

	var res accountapi.ChannelTest
	o.send(t, "POST", "/api/admin/channels/up1/test", `{"model":"m"}`, &res)
	if !res.OK || res.LatencyMS != 12 {
		t.Fatalf("test: %+v", res)
	}
	if w := o.send(t, "POST", "/api/admin/channels/gone/test", `{}`, nil); w.Code != 404 || errorCode(t, w) != "channel_test_refused" {
		t.Fatalf("testing an unknown channel: %d %s", w.Code, w.Body)
	}
	if strings.Join(o.tested, ",") != "up1/m,gone/" {
		t.Fatalf("the tester was asked %v", o.tested)
	}
	// not for users
	w := do(o.h, "POST", "/api/user/login", `{"username":"ann","password":"password-ann"}`, nil)
	ann := w.Result().Cookies()[0]
	for _, p := range []string{"/api/admin/channels", "/api/admin/dashboard"} {
		if w := do(o.h, "GET", p, "", func(r *http.Request) { r.AddCookie(ann) }); w.Code != 403 {
			t.Fatalf("a user GET %s: %d", p, w.Code)
		}
	}
	if w := do(o.h, "POST", "/api/admin/channels/up1/test", `{}`, func(r *http.Request) { r.AddCookie(ann) }); w.Code != 403 || len(o.tested) != 2 {
		t.Fatalf("a user's channel test: %d, tester asked %v", w.Code, o.tested)
	}
}

// TestAdminDashboard: requests, spend and tokens per day, model and user,
// errors, channels and keys, from the daily totals; the cache's share of
// prompt tokens.
func TestAdminDashboard(t *testing.T) {
	o := newOperatorAPI(t)
	yesterday := time.Now().UTC().Truncate(24 * time.Hour).Add(-12 * time.Hour)
	o.settle(t,
		&store.UsageLog{UserID: o.ann.ID, TokenID: 7, Model: "m", Channel: "up1", Status: 200, PromptTokens: 100, CachedTokens: 25, CompletionTokens: 10, Cost: 3000, CreatedAt: yesterday},
		&store.UsageLog{UserID: o.ann.ID, TokenID: 7, Model: "m", Channel: "up1", Status: 200, PromptTokens: 100, CompletionTokens: 10, Cost: 3000},
		&store.UsageLog{UserID: o.bob.ID, TokenID: 8, Model: "other", Channel: "up2", Status: 200, PromptTokens: 200, CachedTokens: 75, CompletionTokens: 20, Cost: 1000},
		&store.UsageLog{UserID: o.bob.ID, TokenID: 8, Model: "other", Channel: "up2", Status: 502, Error: "down"},
	)
	type series struct {
		Name     string
		ID       int64
		Requests int64
		Cost     int64
		Tokens   int64
		Errors   int64
		Daily    []struct {
			Day      string
			Requests int64
			Errors   int64
		}
	}
	var out struct {
		Days   int
		Total  series
		Cache  struct{ Share float64 }
		Models []series
		Users  []series
		Recent struct {
			Total    series
			Channels []series
			Keys     []series
			Users    []series
		}
	}
	o.send(t, "GET", "/api/admin/dashboard?days=7", "", &out)
	today := time.Now().UTC().Format(time.DateOnly)
	if out.Days != 7 || len(out.Total.Daily) != 7 || out.Total.Daily[6].Day != today {
		t.Fatalf("days: %+v", out.Total.Daily)
	}
	if out.Total.Requests != 4 || out.Total.Cost != 7000 || out.Total.Tokens != 440 || out.Total.Daily[5].Requests != 1 || out.Total.Daily[6].Requests != 3 {
		t.Fatalf("totals: %+v", out.Total)
	}
	if out.Cache.Share != 0.25 {
		t.Fatalf("cache share %v, want 100 of 400 prompt tokens", out.Cache.Share)
	}
	if len(out.Models) != 2 || out.Models[0].Name != "m" || out.Models[0].Cost != 6000 || out.Models[1].Name != "other" {
		t.Fatalf("models: %+v", out.Models)
	}
	if len(out.Users) != 2 || out.Users[0].Name != "ann" || out.Users[1].Name != "bob" || out.Users[1].Requests != 2 {
		t.Fatalf("users: %+v", out.Users)
	}
	r := out.Recent
	if r.Total.Requests != 4 || r.Total.Errors != 1 || r.Total.Daily[6].Errors != 1 {
		t.Fatalf("recent: %+v", r)
	}
	if len(r.Channels) != 2 || r.Channels[0].Name != "up1" || r.Channels[1].Errors != 1 {
		t.Fatalf("channels: %+v", r.Channels)
	}
	// key 7 is gone from the store (the rows name ids only): named so
	if len(r.Keys) != 2 || r.Keys[0].ID != 7 || r.Keys[0].Name != "deleted key #7" {
		t.Fatalf("keys: %+v", r.Keys)
	}
	if w := o.send(t, "GET", "/api/admin/dashboard?days=91", "", nil); w.Code != 400 {
		t.Fatalf("days=91: %d", w.Code)
	}
}

// TestAdminSumsFromDailyTotals: the dashboard's errors, channels and keys
// and the channels page's traffic come from the daily totals written with
// the rows, not from the rows: they stay when retention has deleted every
// row (with 50 million rows a scan of the rows took seconds).
func TestAdminSumsFromDailyTotals(t *testing.T) {
	o := newOperatorAPI(t)
	o.settle(t,
		&store.UsageLog{UserID: o.ann.ID, TokenID: 7, Model: "m", Channel: "up1", Status: 200, LatencyMS: 100, Cost: 3000},
		&store.UsageLog{UserID: o.bob.ID, TokenID: 8, Model: "other", Channel: "up1", Status: 502, LatencyMS: 300, Error: "down"},
	)
	for {
		n, err := o.st.DeleteUsageBefore(context.Background(), time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var dash struct {
		Recent struct {
			Total    struct{ Requests, Errors int64 }
			Channels []struct{ Name string }
			Keys     []struct{ ID int64 }
		}
	}
	o.send(t, "GET", "/api/admin/dashboard?days=1", "", &dash)
	if r := dash.Recent; r.Total.Requests != 2 || r.Total.Errors != 1 || len(r.Channels) != 1 || len(r.Keys) != 2 {
		t.Fatalf("the dashboard after retention: %+v", r)
	}
	var chans struct {
		Data []struct {
			Name   string
			Recent struct {
				Requests, Errors int64
				AvgLatencyMS     int64 `json:"avg_latency_ms"`
			}
		}
	}
	o.send(t, "GET", "/api/admin/channels", "", &chans)
	if r := chans.Data[0].Recent; r.Requests != 2 || r.Errors != 1 || r.AvgLatencyMS != 200 {
		t.Fatalf("up1's traffic after retention: %+v", r)
	}
}

// TestAdminResetPassword: an administrator resets a user's password, or
// has one made and shown once; the old one stops working.
func TestAdminResetPassword(t *testing.T) {
	o := newOperatorAPI(t)
	var out struct {
		Password      string
		SessionsEnded bool `json:"sessions_ended"`
	}
	o.send(t, "POST", fmt.Sprintf("/api/admin/users/%d/password", o.ann.ID), `{"password":"chosen-by-boss"}`, &out)
	if out.Password != "" || !out.SessionsEnded {
		t.Fatalf("a chosen password: %+v", out)
	}
	if w := do(o.h, "POST", "/api/user/login", `{"username":"ann","password":"chosen-by-boss"}`, nil); w.Code != 200 {
		t.Fatalf("the new password: %d", w.Code)
	}
	o.send(t, "POST", fmt.Sprintf("/api/admin/users/%d/password", o.ann.ID), `{}`, &out)
	if len(out.Password) != 20 {
		t.Fatalf("a made password: %+v", out)
	}
	login, _ := json.Marshal(map[string]string{"username": "ann", "password": out.Password})
	if w := do(o.h, "POST", "/api/user/login", string(login), nil); w.Code != 200 {
		t.Fatalf("the made password: %d", w.Code)
	}
	if w := o.send(t, "POST", fmt.Sprintf("/api/admin/users/%d/password", o.ann.ID), `{"password":"short"}`, nil); w.Code != 400 {
		t.Fatalf("a short password: %d", w.Code)
	}
	boss, _ := o.st.UserByName(context.Background(), "boss")
	if w := o.send(t, "POST", fmt.Sprintf("/api/admin/users/%d/password", boss.ID), `{"password":"my-own-new-one"}`, nil); w.Code != 403 {
		t.Fatalf("resetting one's own: %d", w.Code)
	}
}
