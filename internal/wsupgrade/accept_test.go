package wsupgrade

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestIsRequest(t *testing.T) {
	h2 := func(method, protocol string) *http.Request {
		r := httptest.NewRequest(method, "/v1/realtime", nil)
		r.ProtoMajor, r.ProtoMinor = 2, 0
		if protocol != "" {
			r.Header.Set(":protocol", protocol)
		}
		return r
	}
	h1 := func(method, upgrade string) *http.Request {
		r := httptest.NewRequest(method, "/v1/realtime", nil)
		if upgrade != "" {
			r.Header.Set("Upgrade", upgrade)
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		r         *http.Request
		ws, xconn bool
	}{
		{"HTTP/1.1 upgrade", h1(http.MethodGet, "websocket"), true, false},
		{"upgrade token in a list, any case", h1(http.MethodGet, "h2c, WebSocket"), true, false},
		{"no upgrade", h1(http.MethodGet, ""), false, false},
		{"another upgrade", h1(http.MethodGet, "h2c"), false, false},
		{"a POST with an upgrade", h1(http.MethodPost, "websocket"), false, false},
		{"HTTP/2 extended CONNECT", h2(http.MethodConnect, "websocket"), true, true},
		{"HTTP/2 CONNECT of another protocol", h2(http.MethodConnect, "webtransport"), false, false},
		{"HTTP/2 GET", h2(http.MethodGet, ""), false, false},
	} {
		if got := IsRequest(tc.r); got != tc.ws {
			t.Errorf("%s: IsRequest = %v, want %v", tc.name, got, tc.ws)
		}
		if got := IsExtendedConnect(tc.r); got != tc.xconn {
			t.Errorf("%s: IsExtendedConnect = %v, want %v", tc.name, got, tc.xconn)
		}
	}
}

// An HTTP/2 stream answers the handshake's 101 with a 200 and without the
// HTTP/1.1 upgrade headers, which HTTP/2 forbids.
func TestH2StreamAnswers200(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &h2Stream{w: rec, body: http.NoBody, rc: http.NewResponseController(rec)}
	s.Header().Set("Upgrade", "websocket")
	s.Header().Set("Connection", "Upgrade")
	s.Header().Set("Sec-WebSocket-Accept", "x")
	s.Header().Set("Sec-WebSocket-Protocol", "realtime")
	s.WriteHeader(http.StatusSwitchingProtocols)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", rec.Code)
	}
	for _, h := range []string{"Upgrade", "Connection", "Sec-WebSocket-Accept"} {
		if rec.Header().Get(h) != "" {
			t.Errorf("%s sent on an HTTP/2 stream", h)
		}
	}
	if rec.Header().Get("Sec-WebSocket-Protocol") != "realtime" {
		t.Error("the chosen subprotocol was dropped")
	}
}
