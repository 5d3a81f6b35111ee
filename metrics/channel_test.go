package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// TestChannelSeriesReadTheChannelRecord: the channel gauges read the
// channel's routing record, so they agree with the router and the health
// answer, and a failover is counted by the channel left and why.
func TestChannelSeriesReadTheChannelRecord(t *testing.T) {
	ch := &routing.Channel{Name: "primary", Type: "openai", Models: []string{"gpt-4o-mini"}}
	reg := prometheus.NewPedanticRegistry()
	m, err := NewRelay(reg, false, []adapters.Dialect{openAIDialect{}}, routing.NewSet([]*routing.Channel{ch}))
	if err != nil {
		t.Fatal(err)
	}
	policy := routing.HealthPolicy{ConsecutiveFailures: 2, BaseEjection: time.Minute, MaxEjection: time.Minute}
	ch.Failed(policy, time.Now(), 0)
	ch.Failed(policy, time.Now(), 0)
	m.ChannelFailed("primary", 429, true)
	m.ChannelFailed("primary", 502, false) // the last channel: no failover
	m.ChannelFailed("unknown", 502, true)  // not a configured channel: ignored

	want := map[string]float64{
		"gateway_channel_consecutive_failures{channel=primary}":               2,
		"gateway_channel_up{channel=primary}":                                 0,
		"gateway_failovers_total{from_channel=primary,reason=rate_limited}":   1,
		"gateway_failovers_total{from_channel=primary,reason=upstream_error}": 0,
	}
	got := gather(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// gather reads every gauge and counter of reg by name{label=value,...}.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
