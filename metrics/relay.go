// Package metrics defines the gateway's Prometheus series (the
// OpenTelemetry GenAI gen_ai_* names and the gateway's own gateway_*) and
// records into them: Relay is the request engine's Meter and Observer, and
// the task engine's cost hook; Database holds the series of what outlives a
// reload. It imports no Caddy package: the Caddy layer registers the
// collectors in its configuration's registry and hands them to the engines.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

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

// Relay are the per-request series of one app instance. Like
// Caddy's caddy_http_* they belong to the configuration: a reload
// registers fresh ones in the new configuration's registry, so they restart
// at zero. The series of what outlives a reload (the usage writer, the key
// cache, reservations) are the database's: see Database.
//
// The request path never looks a label up by value: every series it
// touches hangs off a route (channel and model, fixed at provision) and is
// created once, on first use, behind an atomic pointer. No lock is shared by
// all requests and nothing is allocated per request.
type Relay struct {
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
	routes   map[string]map[string]*routeSeries
	channels map[string]*channelSeries
}

// routeSeries are the series of one model on one channel.
type routeSeries struct {
	m                        *Relay
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

// channelSeries are the failover counters of one channel; its state (the
// failures since its last success, ejection) is its routing.Channel's.
type channelSeries struct {
	failovers [len(failoverReasons)]prometheus.Counter
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

// NewRelay registers the per-request series of the channels in reg: one
// route per channel and model the channels serve (and one for models they
// do not), labelled with the channel's adapter type. perUser adds a user_id
// label to gateway_requests_total and gateway_cost_units_total. dialects
// are the client dialects in routing order.
func NewRelay(reg prometheus.Registerer, perUser bool, dialects []adapters.Dialect, channels *routing.Set) (*Relay, error) {
	genai := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "channel"}
	m := &Relay{
		perUser:  perUser,
		dialects: dialects,
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
	for _, ch := range channels.All() {
		cs := &channelSeries{}
		for i, reason := range failoverReasons {
			cs.failovers[i] = m.failovers.WithLabelValues(ch.Name, reason)
		}
		m.channels[ch.Name] = cs
		failing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "gateway_channel_consecutive_failures",
			Help:        "Failed attempts (connection errors, 408, 429, 5xx) on a channel since its last success.",
			ConstLabels: prometheus.Labels{"channel": ch.Name},
		}, func() float64 { return float64(ch.Failing()) })
		if err := reg.Register(failing); err != nil {
			return nil, err
		}
		up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "gateway_channel_up",
			Help:        "1 while a channel takes requests, 0 while it is ejected for failing (GET /gateway/channels on the admin endpoint says until when).",
			ConstLabels: prometheus.Labels{"channel": ch.Name},
		}, func() float64 {
			if ch.Ejected(time.Now()) {
				return 0
			}
			return 1
		})
		if err := reg.Register(up); err != nil {
			return nil, err
		}
		addRoute(ch.Name, ch.Type, otherModel)
		for _, model := range ch.Models {
			models[model] = true
			addRoute(ch.Name, ch.Type, model)
		}
		for model := range ch.ModelMap {
			models[model] = true
			addRoute(ch.Name, ch.Type, model)
		}
	}
	for model := range models {
		addRoute("", "", model)
	}
	return m, nil
}

// route finds the series of a model on a channel without allocating.
func (m *Relay) route(channel, model string) *routeSeries {
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

func (m *Relay) dialectIndex(d adapters.Dialect) int {
	for i, x := range m.dialects {
		if x == d {
			return i
		}
	}
	return len(m.dialects) - 1
}

// Observe records a settled request. It is the engine's Meter.
func (m *Relay) Observe(x *engine.Exchange, u adapters.Usage, cost int64, took time.Duration) {
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
func (m *Relay) ChannelFailed(channel string, status int, next bool) {
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

// TaskCost adds a settled task's charge to gateway_cost_units_total.
func (m *Relay) TaskCost(model string, userID, cost int64) {
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
