package keyauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// headerDialect reads its key from a header and ?key=, as Gemini's
// clients may send it; stripping removes both.
type headerDialect struct {
	adapters.Dialect
	header string
}

func (d headerDialect) Credential(r *http.Request) string {
	if k := r.Header.Get(d.header); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

func (d headerDialect) StripCredentials(r *http.Request) {
	r.Header.Del(d.header)
	q := r.URL.Query()
	if q.Has("key") {
		q.Del("key")
		r.URL.RawQuery = q.Encode()
	}
}

func (d headerDialect) CredentialHint() string { return "'" + d.header + ": sk-...'" }

// fakeKeys knows one key, or fails every lookup with err.
type fakeKeys struct {
	key     string
	id      *keys.Identity
	err     error
	lookups int
}

func (f *fakeKeys) Lookup(_ context.Context, key string) (*keys.Identity, error) {
	f.lookups++
	if f.err != nil {
		return nil, f.err
	}
	if key != f.key {
		return nil, keys.ErrUnknownKey
	}
	return f.id, nil
}

type fakeSessions struct {
	id *keys.Identity
	e  *adapters.Error
}

func (f fakeSessions) Identity(http.ResponseWriter, *http.Request) (*keys.Identity, *adapters.Error) {
	return f.id, f.e
}

// noSecrets knows no client secret.
type noSecrets struct{}

func (noSecrets) CreateClientSecret(context.Context, *store.ClientSecret) error { return nil }
func (noSecrets) ClientSecretByHash(context.Context, string) (*store.ClientSecret, error) {
	return nil, store.ErrNotFound
}
func (noSecrets) TokenByID(context.Context, int64) (*store.Token, error) {
	return nil, store.ErrNotFound
}
func (noSecrets) UserByID(context.Context, int64) (*store.User, error) { return nil, store.ErrNotFound }

func identity(status string, expires time.Time) *keys.Identity {
	return &keys.Identity{User: &store.User{ID: 1, Username: "ada", Status: store.UserEnabled},
		Token: &store.Token{ID: 2, Status: status, ExpiresAt: expires}}
}

func newAuth(k *fakeKeys, s fakeSessions) *Authenticator {
	return New(Config{
		Dialects:      []adapters.Dialect{headerDialect{header: "X-Goog-Api-Key"}, headerDialect{header: "X-Api-Key"}},
		Keys:          k,
		Sessions:      s,
		ClientSecrets: noSecrets{},
		Failures:      keys.NewLRU(100),
		ClientAddress: func(r *http.Request) string { return r.RemoteAddr },
	})
}

// A key is taken from where the route's dialect reads it and removed
// wherever any dialect reads one, the query and RequestURI included.
func TestTakeKeyStripsEveryDialect(t *testing.T) {
	a := newAuth(&fakeKeys{}, fakeSessions{})
	r := httptest.NewRequest("POST", "/v1beta/models/m:generateContent?key=sk-query&alt=sse", nil)
	r.Header.Set("X-Api-Key", "sk-other")
	if got := a.TakeKey(r, headerDialect{header: "X-Goog-Api-Key"}); got != "sk-query" {
		t.Fatalf("key %q, want sk-query", got)
	}
	if r.Header.Get("X-Api-Key") != "" || r.URL.Query().Has("key") {
		t.Fatalf("a key is left in the request: %v %q", r.Header, r.URL.RawQuery)
	}
	if strings.Contains(r.RequestURI, "sk-") || !strings.Contains(r.RequestURI, "alt=sse") {
		t.Fatalf("RequestURI %q, want the stripped query", r.RequestURI)
	}
}

func TestIdentify(t *testing.T) {
	d := headerDialect{header: "X-Api-Key"}
	good := identity(store.TokenEnabled, time.Time{})
	cases := []struct {
		name     string
		keys     *fakeKeys
		sessions fakeSessions
		key      string
		op       adapters.Operation
		code     string // "" when let through
		status   int
	}{
		{name: "valid key", keys: &fakeKeys{key: "sk-a", id: good}, key: "sk-a"},
		{name: "unknown key", keys: &fakeKeys{key: "sk-a", id: good}, key: "sk-b", code: "invalid_api_key", status: 401},
		{name: "disabled key", keys: &fakeKeys{key: "sk-a", id: identity(store.TokenDisabled, time.Time{})}, key: "sk-a", code: "token_disabled", status: 401},
		{name: "expired key", keys: &fakeKeys{key: "sk-a", id: identity(store.TokenEnabled, time.Now().Add(-time.Hour))}, key: "sk-a", code: "token_expired", status: 401},
		{name: "store down", keys: &fakeKeys{err: errors.New("database is locked")}, key: "sk-a", code: "", status: 503},
		{name: "no key, no session", keys: &fakeKeys{}, code: "missing_api_key", status: 401},
		{name: "no key, a session", keys: &fakeKeys{}, sessions: fakeSessions{id: good}},
		{name: "no key, a refused session", keys: &fakeKeys{}, sessions: fakeSessions{e: &adapters.Error{Status: 403, Code: "cross_origin_session"}}, code: "cross_origin_session", status: 403},
		{name: "client secret elsewhere", keys: &fakeKeys{}, key: "ek_abc", op: adapters.OpChat, code: "client_secret_not_allowed", status: 401},
		{name: "client secret unknown", keys: &fakeKeys{}, key: "ek_abc", op: adapters.OpRealtime, code: "invalid_client_secret", status: 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAuth(c.keys, c.sessions)
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			_, id, e := a.Identify(w, r, d, c.op, c.key)
			if c.status == 0 {
				if e != nil || id == nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || id != nil {
				t.Fatalf("let through, want %d %s", c.status, c.code)
			}
			if e.Status != c.status || e.Code != c.code {
				t.Fatalf("refused %d %q, want %d %q", e.Status, e.Code, c.status, c.code)
			}
			if strings.Contains(e.Message, "sk-a") || strings.Contains(e.Message, "ek_abc") || strings.Contains(e.Message, "database is locked") {
				t.Fatalf("the refusal names a secret or the cause: %q", e.Message)
			}
		})
	}
	t.Run("hint", func(t *testing.T) {
		_, _, e := newAuth(&fakeKeys{}, fakeSessions{}).Identify(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), d, adapters.OpUnknown, "")
		if !strings.Contains(e.Message, "X-Api-Key: sk-...") {
			t.Fatalf("no hint of the dialect's header: %q", e.Message)
		}
	})
}

// An address that sent MaxFailures invalid keys within the window is
// answered 429, with Retry-After, without a lookup, even with a valid key;
// another address is not; the window's end lets it in again.
func TestFailedAttemptsLimited(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	k := &fakeKeys{key: "sk-good", id: identity(store.TokenEnabled, time.Time{})}
	a := newAuth(k, fakeSessions{})
	a.cfg.Now = func() time.Time { return now }
	d := headerDialect{header: "X-Api-Key"}
	try := func(addr, key string) (*httptest.ResponseRecorder, *adapters.Error) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/messages", nil)
		r.RemoteAddr = addr
		_, _, e := a.Identify(w, r, d, adapters.OpChat, key)
		return w, e
	}
	for i := range MaxFailures {
		if _, e := try("192.0.2.1", "sk-bad"); e == nil || e.Code != "invalid_api_key" {
			t.Fatalf("attempt %d: %v, want invalid_api_key", i, e)
		}
	}
	lookups := k.lookups
	w, e := try("192.0.2.1", "sk-good")
	if e == nil || e.Status != http.StatusTooManyRequests || e.Code != "too_many_failed_authentications" {
		t.Fatalf("after %d failures: %v, want 429", MaxFailures, e)
	}
	if w.Header().Get("Retry-After") != "60" {
		t.Fatalf("Retry-After %q, want 60", w.Header().Get("Retry-After"))
	}
	if k.lookups != lookups {
		t.Fatal("a limited address's key was looked up")
	}
	if _, e := try("192.0.2.2", "sk-good"); e != nil {
		t.Fatalf("another address refused: %v", e)
	}
	now = now.Add(FailureWindow + time.Second)
	if _, e := try("192.0.2.1", "sk-good"); e != nil {
		t.Fatalf("refused after the window: %v", e)
	}
}

// oneSecret knows the client secret ek_known, minted by good's key.
type oneSecret struct{ good *keys.Identity }

func (oneSecret) CreateClientSecret(context.Context, *store.ClientSecret) error { return nil }
func (s oneSecret) ClientSecretByHash(_ context.Context, h string) (*store.ClientSecret, error) {
	if h != keys.Hash("ek_known") {
		return nil, store.ErrNotFound
	}
	return &store.ClientSecret{IDHash: h, TokenID: s.good.Token.ID}, nil
}
func (s oneSecret) TokenByID(context.Context, int64) (*store.Token, error) { return s.good.Token, nil }
func (s oneSecret) UserByID(context.Context, int64) (*store.User, error)   { return s.good.User, nil }

// A client secret opens the Realtime socket as the key that minted it,
// and the request carries the secret on; a key's request carries none.
func TestClientSecretOnTheRequest(t *testing.T) {
	good := identity(store.TokenEnabled, time.Time{})
	a := newAuth(&fakeKeys{key: "sk-a", id: good}, fakeSessions{})
	a.cfg.ClientSecrets = oneSecret{good}
	d := headerDialect{header: "X-Api-Key"}
	r, id, e := a.Identify(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/realtime", nil), d, adapters.OpRealtime, "ek_known")
	if e != nil || id == nil || id.Token != good.Token || ClientSecretFrom(r.Context()) == nil {
		t.Fatalf("secret: %v %v %v", e, id, ClientSecretFrom(r.Context()))
	}
	r, _, e = a.Identify(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/realtime", nil), d, adapters.OpRealtime, "sk-a")
	if e != nil || ClientSecretFrom(r.Context()) != nil {
		t.Fatalf("key: %v %v", e, ClientSecretFrom(r.Context()))
	}
}
