package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/alerts"
)

// Alerts are the budget alert notifier's series, read from it at each scrape:
// the notifier's own, so they start again with a new one (a reload's).
func Alerts(n *alerts.Notifier) []prometheus.Collector {
	counter := func(name, help string, v func(alerts.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(n.Stats())) })
	}
	return []prometheus.Collector{
		counter("gateway_alerts_claimed_total", "Budget threshold crossings this instance announced.",
			func(s alerts.Stats) uint64 { return s.Claimed }),
		counter("gateway_alerts_delivered_total", "Alert webhooks the receiver answered with 2xx.",
			func(s alerts.Stats) uint64 { return s.Sent }),
		counter("gateway_alerts_given_up_total", "Alerts given up after their bounded attempts.",
			func(s alerts.Stats) uint64 { return s.GivenUp }),
		counter("gateway_alerts_dropped_total", "Users and keys left out of a look at their spend by a full pending set.",
			func(s alerts.Stats) uint64 { return s.Dropped }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_alerts_queue_depth",
			Help: "Alerts waiting for a delivery worker."}, func() float64 { return float64(n.Stats().Queued) }),
	}
}
