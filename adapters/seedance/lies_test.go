package seedance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestLyingVendor: answers that break Ark's documented shape are errors.
func TestLyingVendor(t *testing.T) {
	cases := map[string]struct{ body, says string }{
		"succeeded without a video": {`{"id":"cgt-1","status":"succeeded","content":{}}`, "gives no video_url"},
		"an unknown status":         {`{"id":"cgt-1","status":"done"}`, "does not document"},
		"not JSON":                  {`<html>ok</html>`, "seedance's answer"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(c.body)) }))
			defer srv.Close()
			up := &adapters.Upstream{Channel: "sd", BaseURL: srv.URL, Key: "k", Model: "m"}
			st, err := Adapter{}.PollTask(context.Background(), http.DefaultClient, up, "cgt-1")
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %+v, %v; want an error saying %q", st, err, c.says)
			}
		})
	}
}
