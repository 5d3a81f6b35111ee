package engine

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Channels that agree on their connection timeouts share a client; the
// other bounds do not split the pool; no client follows a redirect.
func TestTransportsClient(t *testing.T) {
	ts := Transports{}
	b := DefaultBounds
	c := ts.Client(b)
	other := b
	other.StreamIdle, other.Timeout, other.MaxResponseBody = time.Second, time.Second, 1
	if ts.Client(other) != c {
		t.Fatal("bounds that agree on dial and response-header timeouts got two clients")
	}
	slow := b
	slow.ResponseHeader = 5 * time.Minute
	if ts.Client(slow) == c || len(ts) != 2 {
		t.Fatalf("a different response-header timeout shares a client (%d clients)", len(ts))
	}
	if tr := ts.Client(slow).Transport.(*http.Transport); tr.ResponseHeaderTimeout != 5*time.Minute || tr.TLSHandshakeTimeout != 10*time.Second {
		t.Fatalf("transport timeouts: %v, %v", tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout)
	}

	var elsewhere bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			elsewhere = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := c.Get(srv.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || elsewhere {
		t.Fatalf("the redirect was followed: status %d", resp.StatusCode)
	}
}
