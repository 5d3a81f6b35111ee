package vidu

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestLyingVendor: answers that break Vidu's documented shape are errors.
func TestLyingVendor(t *testing.T) {
	cases := map[string]struct{ body, says string }{
		"success without a creation": {`{"id":"1","state":"success","creations":[]}`, "gives no creation"},
		"an unknown state":           {`{"id":"1","state":"done"}`, "does not document"},
		"not JSON":                   {`<html>ok</html>`, "vidu's answer"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(c.body)) }))
			defer srv.Close()
			up := &adapters.Upstream{Channel: "vd", BaseURL: srv.URL, Key: "k", Model: "viduq1"}
			st, err := Adapter{}.PollTask(context.Background(), http.DefaultClient, up, "1")
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %+v, %v; want an error saying %q", st, err, c.says)
			}
		})
	}
}
