package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
)

// Register adds collectors to a registry, letting one that is there
// already be: the database's collectors join each configuration's registry.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				continue
			}
			return err
		}
	}
	return nil
}

// Database are the series of what one database entry holds: the
// usage writer, the key cache and the reservations. They live as long as
// the entry, across reloads, and join each new configuration's registry,
// as Caddy's own admin and config counters do: so they do not restart at
// a reload.
type Database struct {
	commitSeconds prometheus.Histogram
	// RetentionDeleted and RetentionBatches count usage_retention's work,
	// counted by the app instance that runs it.
	RetentionDeleted prometheus.Counter
	RetentionBatches prometheus.Counter
	// Collectors are every series, to Register in each configuration's
	// registry.
	Collectors []prometheus.Collector
}

// NewDatabase builds the series of a database entry's usage writer,
// ledger and key cache, and has the writer time its commits.
func NewDatabase(writer *billing.Writer, ledger *billing.Ledger, keyCache *keys.Cache) *Database {
	dm := &Database{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gateway_usage_commit_seconds",
			Help:    "Time one usage batch took to commit (failed attempts included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		RetentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_usage_retention_deleted_total",
			Help: "Usage rows deleted by usage_retention.",
		}),
		RetentionBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_usage_retention_batches_total",
			Help: "Delete statements usage_retention ran that deleted rows.",
		}),
	}
	writer.OnCommit(func(took time.Duration, _ int, _ error) {
		dm.commitSeconds.Observe(took.Seconds())
	})
	dm.Collectors = []prometheus.Collector{
		dm.commitSeconds, dm.RetentionDeleted, dm.RetentionBatches,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_usage_queue_depth",
			Help: "Usage rows waiting to be committed.",
		}, func() float64 { return float64(writer.QueueDepth()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_usage_write_errors_total",
			Help: "Usage batch commits that failed (each is retried).",
		}, func() float64 { return float64(writer.WriteErrors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_reserved_units",
			Help: "Quota held by requests in flight, in units (1,000,000 = 1 USD).",
		}, func() float64 { return float64(ledger.Reserved()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_key_cache_hits_total",
			Help: "API key lookups answered from the cache.",
		}, func() float64 { h, _ := keyCache.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_key_cache_misses_total",
			Help: "API key lookups that read the store.",
		}, func() float64 { _, m := keyCache.Stats(); return float64(m) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "gateway_image_fetches_total",
			Help:        "Images fetched from a URL for an upstream that takes only inline images.",
			ConstLabels: prometheus.Labels{"result": "ok"},
		}, func() float64 { ok, _ := adapters.ImageFetches(); return float64(ok) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "gateway_image_fetches_total",
			Help:        "Images fetched from a URL for an upstream that takes only inline images.",
			ConstLabels: prometheus.Labels{"result": "error"},
		}, func() float64 { _, failed := adapters.ImageFetches(); return float64(failed) }),
	}
	return dm
}
