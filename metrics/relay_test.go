package metrics

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// openAIDialect stands for the openai adapter's dialect: the metrics read
// only its name.
type openAIDialect struct{ adapters.Dialect }

func (openAIDialect) Name() string { return "openai" }

// testMetrics builds the relay's metrics for one channel of the openai
// adapter serving gpt-4o-mini, in a registry of their own.
func testMetrics(t testing.TB, perUser bool) (*Relay, *engine.Exchange) {
	dialect := openAIDialect{}
	channels := routing.NewSet([]*routing.Channel{{Name: "primary", Type: "openai", Models: []string{"gpt-4o-mini"}}})
	m, err := NewRelay(prometheus.NewPedanticRegistry(), perUser, []adapters.Dialect{dialect}, channels)
	if err != nil {
		t.Fatal(err)
	}
	x := &engine.Exchange{
		R:       httptest.NewRequest("POST", "/v1/chat/completions", nil),
		Dialect: dialect,
		ID:      &keys.Identity{User: &store.User{ID: 7}, Token: &store.Token{ID: 9}},
		Req:     &adapters.Request{Op: adapters.OpChat, Model: "gpt-4o-mini", Stream: true},
		Channel: "primary",
		Status:  200,
		TTFB:    time.Millisecond,
	}
	return m, x
}

// TestObserveAllocatesNothing: once a series exists, recording a request
// allocates nothing, on success and on failure alike.
func TestObserveAllocatesNothing(t *testing.T) {
	m, x := testMetrics(t, false)
	u := adapters.Usage{PromptTokens: 10, CompletionTokens: 20, CachedTokens: 4}
	for _, status := range []int{200, 502} {
		x.Status = status
		m.Observe(x, u, 14, 5*time.Millisecond) // creates the series
		if n := testing.AllocsPerRun(1000, func() { m.Observe(x, u, 14, 5*time.Millisecond) }); n != 0 {
			t.Errorf("status %d: %v allocations per request, want 0", status, n)
		}
	}
	x.Req.Model = "someone-made-this-up"
	if rs := m.route(x.Channel, x.Req.Model); rs.model != otherModel {
		t.Fatalf("an unconfigured model got its own series %q", rs.model)
	}
}

func BenchmarkObserve(b *testing.B) {
	m, x := testMetrics(b, false)
	u := adapters.Usage{PromptTokens: 10, CompletionTokens: 20}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(x, u, 14, 5*time.Millisecond)
		}
	})
}
