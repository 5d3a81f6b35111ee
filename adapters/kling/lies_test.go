package kling

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestLyingVendor: answers that break Kling's documented shape are errors,
// never a finished task without a video or a status made up.
func TestLyingVendor(t *testing.T) {
	cases := map[string]struct{ body, says string }{
		"succeed without a video": {`{"code":0,"message":"SUCCEED","data":{"task_id":"1","task_status":"succeed","task_result":{"videos":[]}}}`, "gives no video"},
		"an unknown status":       {`{"code":0,"message":"SUCCEED","data":{"task_id":"1","task_status":"done"}}`, "does not document"},
		"not JSON":                {`<html>ok</html>`, "not its JSON envelope"},
		"a refusal inside a 200":  {`{"code":1302,"message":"The API request is too fast","data":null}`, "too fast"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(c.body)) }))
			defer srv.Close()
			up := &adapters.Upstream{Channel: "kl", BaseURL: srv.URL, Key: "ak:sk", Model: "kling-v2-1"}
			st, err := Adapter{}.PollTask(context.Background(), http.DefaultClient, up, "text2video/1")
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %+v, %v; want an error saying %q", st, err, c.says)
			}
		})
	}
}
