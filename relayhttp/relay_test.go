package relayhttp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/internal/serverside"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// A request no key was checked for, and one for a path no dialect
// serves, are answered before the engine or the database is reached, in
// the caller's dialect.
func TestServeAnswersBeforeTheEngine(t *testing.T) {
	held := 0
	h := New(Config{Request: serverside.Request{EnterDatabase: func() func() { held++; return func() {} }}})
	id := &keys.Identity{User: &store.User{ID: 1}, Token: &store.Token{ID: 2}}
	for _, tt := range []struct {
		name   string
		op     adapters.Operation
		id     *keys.Identity
		status int
		says   string
	}{
		{"no key", adapters.OpChat, nil, http.StatusUnauthorized, "put gateway_auth before gateway_relay"},
		{"unknown path", adapters.OpUnknown, id, http.StatusNotFound, "unknown endpoint POST /v1/nowhere"},
		{"a socket on an HTTP path", adapters.OpUpgrade, id, http.StatusUpgradeRequired, "served over HTTP only"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/nowhere", nil)
		if err := h.Serve(w, r, tasks.Dialect{}, tt.op, tt.id); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.name, w.Code, w.Body, tt.status, tt.says)
		}
	}
	if held != 0 {
		t.Errorf("the database was held %d times for requests that never reach it", held)
	}
}

// A body is counted against its key and its client's address; IPv6
// clients by their /64.
func TestBodyOwner(t *testing.T) {
	id := &keys.Identity{Token: &store.Token{ID: 7}}
	if got := BodyOwner("192.0.2.1", id); got != (bodies.Owner{Key: 7, Address: "192.0.2.1"}) {
		t.Errorf("IPv4: %+v", got)
	}
	a, b := BodyOwner("2001:db8:1:2::1", id), BodyOwner("2001:db8:1:2:ffff::9", id)
	if a != b || a.Key != 7 {
		t.Errorf("two addresses of one /64 are counted apart: %+v, %+v", a, b)
	}
	if c := BodyOwner("2001:db8:1:3::1", id); c == a {
		t.Errorf("two /64s are counted together: %+v", c)
	}
}

// A refusal of the body budget names the share taken and the option
// that sets it, and asks for a retry after a second; the whole budget
// taken is the gateway's state, a 503.
func TestBodyBusy(t *testing.T) {
	b := bodies.NewBudget(BodyLimits(1<<20, 0, 0, 1<<10))
	for _, tt := range []struct {
		err     error
		uploads bool
		status  int
		says    string
	}{
		{bodies.ErrKeyBusy, false, http.StatusTooManyRequests, fmt.Sprintf("%d bytes of request bodies, its share (max_inflight_body_per_key)", 1<<18)},
		{bodies.ErrAddressBusy, true, http.StatusTooManyRequests, "(max_inflight_uploads_per_address)"},
		{bodies.ErrBusy, true, http.StatusServiceUnavailable, "too many uploads at once"},
		{bodies.ErrBusy, false, http.StatusServiceUnavailable, "too many large requests at once"},
	} {
		h := http.Header{}
		e := BodyBusy(tt.err, h, b, tt.uploads)
		if e.Status != tt.status || !strings.Contains(e.Message, tt.says) || h.Get("Retry-After") != "1" {
			t.Errorf("%v (uploads %v): %d %q, Retry-After %q; want %d saying %q", tt.err, tt.uploads, e.Status, e.Message, h.Get("Retry-After"), tt.status, tt.says)
		}
	}
}

// The images a chat request gives by URL are counted in its messages and
// in its tool results; inline images, and requests other than chat, are not.
func TestImageURLsCounted(t *testing.T) {
	byURL := adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{URL: "https://example.com/a.png"}}
	inline := adapters.Part{Type: adapters.PartImage, Image: &adapters.Image{MediaType: "image/png", Data: []byte{1}}}
	req := &adapters.Request{Chat: &adapters.ChatRequest{Messages: []adapters.Message{
		{Role: adapters.RoleUser, Parts: []adapters.Part{byURL, inline, {Type: adapters.PartText, Text: "hi"}}},
		{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartToolResult,
			ToolResult: &adapters.ToolResult{Content: []adapters.Part{byURL, inline}}}}},
	}}}
	if n := imageURLs(req); n != 2 {
		t.Errorf("imageURLs = %d, want 2", n)
	}
	if n := imageURLs(&adapters.Request{}); n != 0 {
		t.Errorf("a request with no chat counts %d images", n)
	}
}
