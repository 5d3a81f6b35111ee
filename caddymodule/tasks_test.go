package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

func TestPriceConfigTaskPrices(t *testing.T) {
	p, err := (&PriceConfig{Task: "0.05", VideoSecond: "0.10", MaxSeconds: 12}).price()
	if err != nil || p.Task != 50_000 || p.VideoSecond != 100_000 || p.MaxSeconds != 12 {
		t.Fatalf("price %+v, %v", p, err)
	}
	if _, err := (&PriceConfig{VideoSecond: "0.10"}).price(); err == nil || !strings.Contains(err.Error(), "needs max_seconds") {
		t.Fatalf("video_second without max_seconds: %v", err)
	}
	if _, err := (&PriceConfig{Task: "-1"}).price(); err == nil {
		t.Fatal("a negative task price was accepted")
	}
}

// TestTaskDirectiveOrder: outside a route block the task handler sits
// after authentication and before the relay, which answers every path.
func TestTaskDirectiveOrder(t *testing.T) {
	src := "{\n\tgateway\n}\n:8080 {\n\tgateway_relay\n\tgateway_tasks\n\tgateway_auth\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	auth, tasks, relay := strings.Index(s, `"gateway_auth"`), strings.Index(s, `"gateway_tasks"`), strings.Index(s, `"gateway_relay"`)
	if auth < 0 || !(auth < tasks && tasks < relay) {
		t.Fatalf("handlers in the wrong order: %s", out)
	}
}
