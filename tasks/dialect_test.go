package tasks

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestDialectErrorShape: the task endpoints' errors are
// {"code": <status>, "error": {"message", "type"}}.
func TestDialectErrorShape(t *testing.T) {
	got := string(Dialect{}.EncodeError(adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "no such task")))
	if want := `{"code":404,"error":{"message":"no such task","type":"` + string(adapters.ErrNotFound) + `"}}`; got != want {
		t.Fatalf("error body %s, want %s", got, want)
	}
	if (Dialect{}).Name() != "task" {
		t.Fatal("the dialect is not named task")
	}
	b, err := DataBody(map[string]any{"task_id": "task_x"})
	if err != nil || string(b) != `{"code":200,"data":{"task_id":"task_x"}}` {
		t.Fatalf("data body %s, %v", b, err)
	}
	if s := FormatTime(time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))); s != "2030-01-02T02:04:05" {
		t.Fatalf("time %s", s)
	}
	for p, want := range map[string]bool{SubmitPath: true, StatusPrefix + "task_x": true, "/api/user/login": false, "/v1/chat/completions": false} {
		if IsPath(p) != want {
			t.Errorf("IsPath(%s) = %v", p, !want)
		}
	}
}
