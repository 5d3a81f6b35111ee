package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/cache"
)

// ResponseCache are the series of the exact response cache: the requests
// it was used for, hit or missed, the money hits saved, and what the
// process's memory holds.
type ResponseCache struct {
	hit, miss, saved prometheus.Counter
}

// NewResponseCache registers the response cache's series in reg; mem is
// the process's entries (its gauges read it when scraped).
func NewResponseCache(reg prometheus.Registerer, mem *cache.Memory) (*ResponseCache, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_response_cache_requests_total",
		Help: "Requests the response cache was used for, by result: hit (answered from it) or miss (relayed; its answer kept when complete).",
	}, []string{"result"})
	saved := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gateway_response_cache_saved_units_total",
		Help: "What hits would have cost beyond what they were charged, in units (1,000,000 = 1 USD).",
	})
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_response_cache_entries",
		Help: "Answers the process's memory holds (store memory), expired ones not yet dropped included.",
	}, func() float64 { n, _ := mem.Stats(); return float64(n) })
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_response_cache_bytes",
		Help: "Bytes the process's memory holds for the response cache, as max_bytes counts them.",
	}, func() float64 { _, b := mem.Stats(); return float64(b) })
	for _, c := range []prometheus.Collector{requests, saved, entries, size} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return &ResponseCache{hit: requests.WithLabelValues("hit"), miss: requests.WithLabelValues("miss"), saved: saved}, nil
}

// Used counts one request the cache was used for.
func (m *ResponseCache) Used(hit bool, saved int64) {
	if hit {
		m.hit.Inc()
		if saved > 0 {
			m.saved.Add(float64(saved))
		}
		return
	}
	m.miss.Inc()
}
