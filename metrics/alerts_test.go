package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/alerts"
)

// A notifier's series register together and read its counts when
// scraped: a new notifier's are all zero.
func TestAlertsSeries(t *testing.T) {
	n, err := alerts.New(alerts.Config{}, nil, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, Alerts(n)...); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[f.GetName()] = c.GetValue()
		} else {
			got[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	for _, name := range []string{"gateway_alerts_claimed_total", "gateway_alerts_delivered_total",
		"gateway_alerts_given_up_total", "gateway_alerts_dropped_total", "gateway_alerts_queue_depth"} {
		v, ok := got[name]
		if !ok {
			t.Errorf("%s is not registered", name)
		} else if v != 0 {
			t.Errorf("%s = %v for a new notifier", name, v)
		}
	}
}
