package caddymodule

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// MetricsConfig sets what the gateway's metrics break down by.
type MetricsConfig struct {
	// PerUser adds a user_id label to gateway_requests_total and
	// gateway_cost_units_total: one series per user, so off by default.
	// With it on, each request pays one label lookup (and its allocation).
	PerUser bool `json:"per_user,omitempty"`
}

// otherModel stands for every model the configuration does not name, so a
// client cannot grow the metrics by inventing model names.
const otherModel = "_other"

// Buckets as the OpenTelemetry GenAI semantic conventions advise them.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
)

// Token types of gen_ai_client_token_usage, in tokenCounts' order.
var tokenTypes = [...]string{"input", "output", "cached_input", "cache_creation_input", "reasoning"}

// Operations as gen_ai_operation_name spells them; opIndex numbers them.
var opNames = [...]string{"chat", "text_completion", "embeddings", "count_tokens", "other"}

func opIndex(op adapters.Operation) int {
	switch op {
	case adapters.OpChat:
		return 0
	case adapters.OpCompletion:
		return 1
	case adapters.OpEmbedding:
		return 2
	case adapters.OpCountTokens:
		return 3
	}
	return 4
}

// relayMetrics are the per-request series of one app instance. Like
// Caddy's caddy_http_* they belong to the configuration: a reload
// registers fresh ones in the new configuration's registry, so they restart
// at zero. The series of what outlives a reload (the usage writer, the key
// cache, reservations) are the database's: see databaseMetrics.
//
// The request path never looks a label up by value: every series it
// touches hangs off a route (channel and model, fixed at provision) and is
// created once, on first use, behind an atomic pointer. No lock is shared by
// all requests and nothing is allocated per request.
type relayMetrics struct {
	perUser   bool
	dialects  []adapters.Dialect
	tokens    *prometheus.HistogramVec
	duration  *prometheus.HistogramVec
	ttft      *prometheus.HistogramVec
	tpot      *prometheus.HistogramVec
	requests  *prometheus.CounterVec
	cost      *prometheus.CounterVec
	failovers *prometheus.CounterVec

	// routes by channel ("" for requests no channel answered), then model
	routes       map[string]map[string]*routeSeries
	channels     map[string]*channelSeries
	channelOrder []*channelSeries // as configured, for the health answer
}

// routeSeries are the series of one model on one channel.
type routeSeries struct {
	m                        *relayMetrics
	provider, channel, model string
	ops                      [len(opNames)]atomic.Pointer[opSeries]
	// requests by dialect index and status class (1xx..5xx)
	requests [maxDialects][6]atomic.Pointer[prometheus.Counter]
	cost     prometheus.Counter
}

// maxDialects bounds the dialects whose requests are counted apart; more
// would share the last slot's counters.
const maxDialects = 8

type opSeries struct {
	tokens   [len(tokenTypes)]prometheus.Observer
	ok       prometheus.Observer // duration of requests without error
	ttft     prometheus.Observer
	tpot     prometheus.Observer
	failures [200]atomic.Pointer[prometheus.Observer] // duration by status 400..599
}

// channelSeries is what the relay and health know of one channel.
type channelSeries struct {
	name, provider string
	failovers      [len(failoverReasons)]prometheus.Counter
	// ch holds the channel's state: its failures since its last success
	ch *routing.Channel
}

var failoverReasons = [...]string{"rate_limited", "timeout", "upstream_error"}

func failoverReason(status int) int {
	switch status {
	case 429:
		return 0
	case 408, 504:
		return 1
	}
	return 2
}

func newRelayMetrics(reg prometheus.Registerer, cfg *MetricsConfig, a *App) (*relayMetrics, error) {
	genai := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "channel"}
	m := &relayMetrics{
		perUser:  cfg != nil && cfg.PerUser,
		dialects: a.dialects,
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens used by a request, by token type (input, output, cached_input, cache_creation_input, reasoning).",
			Buckets: tokenBuckets,
		}, append(genai[:4:4], "gen_ai_token_type")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_request_duration_seconds",
			Help:    "Time from the request's arrival to the end of its answer; error_type is the status of a failed request.",
			Buckets: durationBuckets,
		}, append(genai[:4:4], "error_type")),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_time_to_first_token_seconds",
			Help:    "Time from a streamed request's arrival to its first event from the upstream.",
			Buckets: ttftBuckets,
		}, genai),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_time_per_output_token_seconds",
			Help:    "Time per output token of a streamed answer, after the first.",
			Buckets: tpotBuckets,
		}, genai),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_failovers_total",
			Help: "Attempts that failed on a channel and moved on to the next, by the channel left and why.",
		}, []string{"from_channel", "reason"}),
		routes:   map[string]map[string]*routeSeries{},
		channels: map[string]*channelSeries{},
	}
	reqLabels := []string{"model", "channel", "dialect", "status_class"}
	costLabels := []string{"model"}
	if m.perUser {
		reqLabels = append(reqLabels, "user_id")
		costLabels = append(costLabels, "user_id")
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_requests_total",
		Help: "Requests the relay answered, by model asked for, channel that answered (empty: none), caller's dialect and status class.",
	}, reqLabels)
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_cost_units_total",
		Help: "Quota charged, in units (1,000,000 = 1 USD), by model.",
	}, costLabels)
	for _, c := range []prometheus.Collector{m.tokens, m.duration, m.ttft, m.tpot, m.requests, m.cost, m.failovers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}

	models := map[string]bool{otherModel: true}
	addRoute := func(channel, provider, model string) {
		if m.routes[channel] == nil {
			m.routes[channel] = map[string]*routeSeries{}
		}
		rs := &routeSeries{m: m, provider: provider, channel: channel, model: model}
		if !m.perUser {
			rs.cost = m.cost.WithLabelValues(model)
		}
		m.routes[channel][model] = rs
	}
	for _, cc := range a.Channels {
		prov, ok := a.providers[cc.Name]
		if !ok {
			continue // skipped at provision: no key
		}
		typ := prov.(caddy.Module).CaddyModule().ID.Name()
		cs := &channelSeries{name: cc.Name, provider: typ, ch: a.channels.Channel(cc.Name)}
		for i, reason := range failoverReasons {
			cs.failovers[i] = m.failovers.WithLabelValues(cc.Name, reason)
		}
		m.channels[cc.Name] = cs
		m.channelOrder = append(m.channelOrder, cs)
		failing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "gateway_channel_consecutive_failures",
			Help:        "Failed attempts (connection errors, 408, 429, 5xx) on a channel since its last success.",
			ConstLabels: prometheus.Labels{"channel": cc.Name},
		}, func() float64 { return float64(cs.failing()) })
		if err := reg.Register(failing); err != nil {
			return nil, err
		}
		if ch := a.channels.Channel(cc.Name); ch != nil {
			up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "gateway_channel_up",
				Help:        "1 while a channel takes requests, 0 while it is ejected for failing (GET /gateway/channels on the admin endpoint says until when).",
				ConstLabels: prometheus.Labels{"channel": cc.Name},
			}, func() float64 {
				if ch.Ejected(time.Now()) {
					return 0
				}
				return 1
			})
			if err := reg.Register(up); err != nil {
				return nil, err
			}
		}
		addRoute(cc.Name, typ, otherModel)
		for _, model := range append(append([]string(nil), cc.Models...), mapKeys(cc.ModelMap)...) {
			models[model] = true
			addRoute(cc.Name, typ, model)
		}
	}
	for model := range models {
		addRoute("", "", model)
	}
	return m, nil
}

// route finds the series of a model on a channel without allocating.
func (m *relayMetrics) route(channel, model string) *routeSeries {
	byModel, ok := m.routes[channel]
	if !ok {
		byModel = m.routes[""]
	}
	if rs, ok := byModel[model]; ok {
		return rs
	}
	return byModel[otherModel]
}

func (rs *routeSeries) op(op adapters.Operation) *opSeries {
	i := opIndex(op)
	if s := rs.ops[i].Load(); s != nil {
		return s
	}
	m, name := rs.m, opNames[i]
	s := &opSeries{
		ok:   m.duration.WithLabelValues(name, rs.provider, rs.model, rs.channel, ""),
		ttft: m.ttft.WithLabelValues(name, rs.provider, rs.model, rs.channel),
		tpot: m.tpot.WithLabelValues(name, rs.provider, rs.model, rs.channel),
	}
	for t, typ := range tokenTypes {
		s.tokens[t] = m.tokens.WithLabelValues(name, rs.provider, rs.model, rs.channel, typ)
	}
	// a racing first request builds the same children: either copy serves
	rs.ops[i].CompareAndSwap(nil, s)
	return rs.ops[i].Load()
}

func (s *opSeries) failure(rs *routeSeries, op adapters.Operation, status int) prometheus.Observer {
	if status < 400 || status > 599 {
		status = 599
	}
	slot := &s.failures[status-400]
	if o := slot.Load(); o != nil {
		return *o
	}
	o := rs.m.duration.WithLabelValues(opNames[opIndex(op)], rs.provider, rs.model, rs.channel, strconv.Itoa(status))
	slot.CompareAndSwap(nil, &o)
	return *slot.Load()
}

var statusClasses = [...]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

func (rs *routeSeries) request(dialect, status int) prometheus.Counter {
	class := status / 100
	if class < 1 || class > 5 {
		class = 5
	}
	dialect = min(dialect, maxDialects-1)
	slot := &rs.requests[dialect][class]
	if c := slot.Load(); c != nil {
		return *c
	}
	c := rs.m.requests.WithLabelValues(rs.model, rs.channel, rs.m.dialects[dialect].Name(), statusClasses[class])
	slot.CompareAndSwap(nil, &c)
	return *slot.Load()
}

func (m *relayMetrics) dialectIndex(d adapters.Dialect) int {
	for i, x := range m.dialects {
		if x == d {
			return i
		}
	}
	return len(m.dialects) - 1
}

// observe records a settled request.
func (m *relayMetrics) Observe(x *engine.Exchange, u adapters.Usage, cost int64, took time.Duration) {
	if m == nil {
		return
	}
	rs := m.route(x.Channel, x.Req.Model)
	status := x.Status
	if status == 0 {
		status = 500 // the handler returned before answering
	}
	if m.perUser {
		uid := strconv.FormatInt(x.ID.User.ID, 10)
		m.requests.WithLabelValues(rs.model, rs.channel, m.dialects[m.dialectIndex(x.Dialect)].Name(), statusClasses[min(max(status/100, 1), 5)], uid).Inc()
		if cost > 0 {
			m.cost.WithLabelValues(rs.model, uid).Add(float64(cost))
		}
	} else {
		rs.request(m.dialectIndex(x.Dialect), status).Inc()
		if cost > 0 {
			rs.cost.Add(float64(cost))
		}
	}
	s := rs.op(x.Req.Op)
	if status >= 400 {
		s.failure(rs, x.Req.Op, status).Observe(took.Seconds())
	} else {
		s.ok.Observe(took.Seconds())
	}
	if x.Channel == "" || status >= 400 {
		return
	}
	if x.Req.Op == adapters.OpCountTokens {
		return
	}
	s.tokens[0].Observe(float64(u.PromptTokens))
	s.tokens[1].Observe(float64(u.CompletionTokens))
	for i, n := range [...]int64{u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if n > 0 {
			s.tokens[2+i].Observe(float64(n))
		}
	}
	if x.Req.Stream && x.TTFB > 0 {
		s.ttft.Observe(x.TTFB.Seconds())
		if u.CompletionTokens > 1 {
			s.tpot.Observe((took - x.TTFB).Seconds() / float64(u.CompletionTokens-1))
		}
	}
}

// ChannelFailed counts a failover from a channel whose attempt failed by
// its fault, when next says another channel is tried. It is the engine's
// Observer; the failures themselves are counted on the channel's record
// (routing.Channel.Failing), which the gauge reads.
func (m *relayMetrics) ChannelFailed(channel string, status int, next bool) {
	if m == nil {
		return
	}
	cs := m.channels[channel]
	if cs == nil {
		return
	}
	if next {
		cs.failovers[failoverReason(status)].Inc()
	}
}

// register adds collectors to a registry, letting one that is there
// already be: the database's collectors join each configuration's registry.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
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

// databaseMetrics are the series of what one database entry holds: the
// usage writer, the key cache and the reservations. They live as long as
// the entry, across reloads, and join each new configuration's registry,
// as Caddy's own admin and config counters do: so they do not restart at
// a reload.
type databaseMetrics struct {
	commitSeconds prometheus.Histogram
	// retention, counted by the app instance that runs it
	retentionDeleted prometheus.Counter
	retentionBatches prometheus.Counter
	collectors       []prometheus.Collector
}

func newDatabaseMetrics(db *database) *databaseMetrics {
	dm := &databaseMetrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gateway_usage_commit_seconds",
			Help:    "Time one usage batch took to commit (failed attempts included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		retentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_usage_retention_deleted_total",
			Help: "Usage rows deleted by usage_retention.",
		}),
		retentionBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_usage_retention_batches_total",
			Help: "Delete statements usage_retention ran that deleted rows.",
		}),
	}
	db.writer.OnCommit(func(took time.Duration, _ int, _ error) {
		dm.commitSeconds.Observe(took.Seconds())
	})
	dm.collectors = []prometheus.Collector{
		dm.commitSeconds, dm.retentionDeleted, dm.retentionBatches,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_usage_queue_depth",
			Help: "Usage rows waiting to be committed.",
		}, func() float64 { return float64(db.writer.QueueDepth()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_usage_write_errors_total",
			Help: "Usage batch commits that failed (each is retried).",
		}, func() float64 { return float64(db.writer.WriteErrors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gateway_reserved_units",
			Help: "Quota held by requests in flight, in units (1,000,000 = 1 USD).",
		}, func() float64 { return float64(db.ledger.Reserved()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_key_cache_hits_total",
			Help: "API key lookups answered from the cache.",
		}, func() float64 { h, _ := db.keys.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_key_cache_misses_total",
			Help: "API key lookups that read the store.",
		}, func() float64 { _, m := db.keys.Stats(); return float64(m) }),
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

// taskCost adds a settled task's charge to gateway_cost_units_total.
func (m *relayMetrics) taskCost(model string, userID, cost int64) {
	if m == nil || cost <= 0 {
		return
	}
	rs := m.route("", model)
	if m.perUser {
		m.cost.WithLabelValues(rs.model, strconv.FormatInt(userID, 10)).Add(float64(cost))
		return
	}
	rs.cost.Add(float64(cost))
}

// failing is the channel's failures since its last success.
func (cs *channelSeries) failing() int64 {
	if cs.ch == nil {
		return 0
	}
	return int64(cs.ch.Failing())
}
