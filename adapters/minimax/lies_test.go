package minimax

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestLyingVendor: answers that break MiniMax's documented shape are
// errors, never a finished task without a file.
func TestLyingVendor(t *testing.T) {
	ok := `"base_resp":{"status_code":0,"status_msg":"success"}`
	cases := map[string]struct{ query, file, says string }{
		"success without a file id": {`{"task_id":"1","status":"Success","file_id":"",` + ok + `}`, ``, "gives no file_id"},
		"a file without a URL":      {`{"task_id":"1","status":"Success","file_id":"9",` + ok + `}`, `{"file":{"file_id":9},` + ok + `}`, "no download_url"},
		"no base_resp":              {`{"task_id":"1","status":"Processing"}`, ``, "carries no base_resp"},
		"an unknown status":         {`{"task_id":"1","status":"Done",` + ok + `}`, ``, "does not document"},
		"a refusal inside a 200":    {`{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded"}}`, ``, "rate limit exceeded"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/files/retrieve" {
					_, _ = w.Write([]byte(c.file))
					return
				}
				_, _ = w.Write([]byte(c.query))
			}))
			defer srv.Close()
			up := &adapters.Upstream{Channel: "mm", BaseURL: srv.URL, Key: "k", Model: "MiniMax-Hailuo-02"}
			st, err := Adapter{}.PollTask(context.Background(), http.DefaultClient, up, "1")
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %+v, %v; want an error saying %q", st, err, c.says)
			}
		})
	}
}
