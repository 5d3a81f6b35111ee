package engine

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// TestRunKeepsEachChannelsLastError: when no channel answers, the usage
// row names none, so each failing channel's record keeps what its last
// failure was (the upstream's words, keys masked) for the channels page.
func TestRunKeepsEachChannelsLastError(t *testing.T) {
	e, _ := newEngine(3)
	var tried []string
	quota := &Failure{Channel: true, UpstreamStatus: http.StatusTooManyRequests, Detail: "quota exceeded for key-b-12345678",
		Err: adapters.Errorf(http.StatusTooManyRequests, adapters.ErrRateLimit, "the upstream is rate limiting")}
	quota.Detail = MaskKeys(quota.Detail, []string{"key-b-12345678"})
	_, f := e.Run(context.Background(), "m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": outage(), "b": quota, "c": outage()}))
	if f == nil || len(tried) != 3 {
		t.Fatalf("tried %v, failure %v", tried, f)
	}
	a, b := e.Channels.Channel("a").State(time.Now()), e.Channels.Channel("b").State(time.Now())
	if a.LastError != "down" || a.LastErrorStatus != http.StatusBadGateway {
		t.Fatalf("a's record: %q %d", a.LastError, a.LastErrorStatus)
	}
	if b.LastErrorStatus != http.StatusTooManyRequests || b.LastError != "the upstream is rate limiting: "+quota.Detail {
		t.Fatalf("b's record: %q %d", b.LastError, b.LastErrorStatus)
	}
	if b.LastError == "" || strings.Contains(b.LastError, "key-b-12345678") {
		t.Fatalf("b's record holds its key: %q", b.LastError)
	}
}
