package accountapi_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

func newAPI(t *testing.T) (*accountapi.Handler, store.Store) {
	t.Helper()
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := account.CreateUser(context.Background(), st, account.Operator,
		account.NewUser{Username: "ann", Password: "password-ann", Role: store.RoleUser}); err != nil {
		t.Fatal(err)
	}
	h := accountapi.New(accountapi.Config{
		Store: st, Keys: keys.NewCache(st, time.Second), Ledger: billing.NewLedger(),
		Gate:     account.NewGate(st, account.GateConfig{}),
		Sessions: &accountapi.Sessions{Logins: account.Sessions{Store: st}},
		Models:   func() []accountapi.Model { return []accountapi.Model{{ID: "m", Chat: true}} },
	})
	return h, st
}

// do sends a request as the console's own page would, unless changed.
func do(h http.Handler, method, path, body string, edit func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Origin", "http://"+r.Host)
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// errorCode is the OpenAI-shaped error's code of an answer.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Type, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return e.Error.Code
}

// TestLoginSessionAndSelf: a login sets an HttpOnly session cookie that
// then names the caller; answers are JSON and never cached.
func TestLoginSessionAndSelf(t *testing.T) {
	h, _ := newAPI(t)
	w := do(h, "POST", "/api/user/login", `{"username":"ann","password":"password-ann"}`, nil)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("login: %d %q, Cache-Control %q", w.Code, w.Body, w.Header().Get("Cache-Control"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != "gateway_session" || !cookies[0].HttpOnly || cookies[0].Secure {
		t.Fatalf("login cookies %+v, want one HttpOnly gateway_session over plain HTTP", cookies)
	}
	w = do(h, "GET", "/api/user/self", "", func(r *http.Request) { r.AddCookie(cookies[0]) })
	var self struct{ Username string }
	if err := json.Unmarshal(w.Body.Bytes(), &self); err != nil || w.Code != http.StatusOK || self.Username != "ann" {
		t.Fatalf("self: %d %q", w.Code, w.Body)
	}
	w = do(h, "GET", "/api/user/models", "", func(r *http.Request) { r.AddCookie(cookies[0]) })
	if strings.TrimSpace(w.Body.String()) != `{"data":[{"id":"m","chat":true}]}` {
		t.Errorf("models: %q", w.Body)
	}

	// the cookie changes nothing without the console's origin
	w = do(h, "POST", "/api/user/logout_all", `{}`, func(r *http.Request) {
		r.Header.Del("Origin")
		r.AddCookie(cookies[0])
	})
	if w.Code != http.StatusForbidden || errorCode(t, w) != "cross_origin" {
		t.Errorf("cross-site logout_all: %d %q", w.Code, w.Body)
	}
	if w = do(h, "GET", "/api/user/self", "", nil); w.Code != http.StatusUnauthorized || errorCode(t, w) != "not_logged_in" {
		t.Errorf("self without a session: %d %q", w.Code, w.Body)
	}
	w = do(h, "POST", "/api/user/login", `{"username":"ann","password":"wrong-password"}`, nil)
	if w.Code != http.StatusUnauthorized || errorCode(t, w) != "invalid_credentials" {
		t.Errorf("wrong password: %d %q", w.Code, w.Body)
	}
}

// TestNoRoute tells a wrong method (405 with Allow) from a wrong path (404).
func TestNoRoute(t *testing.T) {
	h, _ := newAPI(t)
	w := do(h, "GET", "/api/user/login", "", nil)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "POST" || errorCode(t, w) != "method_not_allowed" {
		t.Errorf("GET login: %d Allow %q %q", w.Code, w.Header().Get("Allow"), w.Body)
	}
	w = do(h, "GET", "/api/admin/nothing", "", nil)
	if w.Code != http.StatusNotFound || errorCode(t, w) != "unknown_endpoint" {
		t.Errorf("unknown path: %d %q", w.Code, w.Body)
	}
	if !accountapi.Handles("/api/user/self") || accountapi.Handles("/api/generate/submit") || accountapi.Handles("/v1/models") {
		t.Error("Handles claims the wrong paths")
	}
}

// TestSecureCookieName: over HTTPS, the client's own or a trusted proxy's,
// the session cookie is the __Host- one; a forwarded header from anyone
// else is the client's word and changes nothing.
func TestSecureCookieName(t *testing.T) {
	trusted := false
	s := &accountapi.Sessions{TrustedProxy: func(*http.Request) bool { return trusted }}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Forwarded-Proto", "https, http")
	if s.Secure(r) || s.CookieName(r) != "gateway_session" {
		t.Errorf("untrusted X-Forwarded-Proto: secure %v, cookie %q", s.Secure(r), s.CookieName(r))
	}
	trusted = true
	if !s.Secure(r) || s.CookieName(r) != "__Host-gateway_session" {
		t.Errorf("trusted X-Forwarded-Proto: secure %v, cookie %q", s.Secure(r), s.CookieName(r))
	}
	trusted = false
	r.TLS = &tls.ConnectionState{}
	if !s.Secure(r) || s.CookieName(r) != "__Host-gateway_session" {
		t.Errorf("TLS: secure %v, cookie %q", s.Secure(r), s.CookieName(r))
	}
}
