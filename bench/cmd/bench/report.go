package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

// report is the whole run, written as JSON under bench/results/.
type report struct {
	Started        time.Time                `json:"started"`
	Finished       time.Time                `json:"finished"`
	Quick          bool                     `json:"quick"`
	Host           map[string]any           `json:"host"`
	Config         map[string]any           `json:"config"`
	Figures        []*figure                `json:"figures"`
	Pass           bool                     `json:"pass"` // every bar met
	Notes          []string                 `json:"notes,omitempty"`
	Machine        machineUse               `json:"machine"`
	MainFreshRSSMB float64                  `json:"main_fresh_rss_mb"`
	Scenarios      []*scenarioResult        `json:"scenarios"`
	Memory         map[string]*memoryResult `json:"memory"`
	Usage          usageResult              `json:"usage"`
	// the gateway_pg target's, when it ran
	UsagePG  *usageResult `json:"usage_pg,omitempty"`
	Database *dbWrites    `json:"database_writes,omitempty"`
	// the spending-windows targets' windows after the run (budgets.go)
	WindowChecks map[string]*windowsCheck `json:"window_checks,omitempty"`
	// each family's own work per request (families.go)
	Families map[string]*familyFigure `json:"families,omitempty"`
	// the response cache's hit, miss and uncached requests (cache.go)
	Cache map[string]*cacheFigure `json:"cache,omitempty"`
	// DBChannels is BenchmarkPlain's Caddyfile channel ("gateway") and
	// database channel ("gateway_db_channel"), in process
	DBChannels map[string]*inprocFigure `json:"db_channels,omitempty"`
	// the highest open-loop rate each target held under each p99 bound
	// (frontier.go)
	Frontier *frontierResult `json:"frontier,omitempty"`

	pg bool // gateway_pg is a target: the table has its columns
}

type scenarioResult struct {
	Key     string                   `json:"key"`
	Title   string                   `json:"title"`
	Targets map[string]*targetResult `json:"targets"`
}

// targetResult is one target in one scenario, all rounds together.
type targetResult struct {
	Requests        int     `json:"requests"`
	OK              int     `json:"ok"`
	Errors          int     `json:"errors"`
	EventMismatch   int     `json:"event_mismatch,omitempty"`
	FirstError      string  `json:"first_error,omitempty"`
	Seconds         float64 `json:"seconds"`
	Throughput      float64 `json:"throughput"` // valid answers per second
	P50ms           float64 `json:"p50_ms"`
	P99ms           float64 `json:"p99_ms"`
	MeanMs          float64 `json:"mean_ms"`
	TTFEP50ms       float64 `json:"ttfe_p50_ms,omitempty"`
	TTFEP99ms       float64 `json:"ttfe_p99_ms,omitempty"`
	CPUSeconds      float64 `json:"cpu_seconds"`        // the Caddy process's
	CPUPerRequestUs float64 `json:"cpu_per_request_us"` // per valid answer
	PeakRSSMB       float64 `json:"peak_rss_mb,omitempty"`
	// gateway_pg only: the PostgreSQL server's processes
	DBCPUSeconds      float64 `json:"db_cpu_seconds,omitempty"`
	DBCPUPerRequestUs float64 `json:"db_cpu_per_request_us,omitempty"`
	// from runs measured again because other processes disturbed them
	DiscardedErrors   int           `json:"discarded_errors,omitempty"`
	DiscardedMismatch int           `json:"discarded_event_mismatch,omitempty"`
	Rounds            []roundResult `json:"rounds"`

	res   load.Result
	wall  time.Duration
	cpu   time.Duration
	dbcpu time.Duration
	peak  int64
}

type roundResult struct {
	Round      int     `json:"round"`
	OK         int     `json:"ok"`
	Errors     int     `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// OtherCPUPct is the share of the machine's CPUs that processes other
	// than the bench, the mock and Caddy used during the round.
	OtherCPUPct  float64 `json:"other_cpu_pct"`
	DBCPUSeconds float64 `json:"db_cpu_seconds,omitempty"` // gateway_pg only
}

// machineUse is how much of the machine other work took during the
// measured runs; more than a few percent makes the figures noisy.
type machineUse struct {
	MeasuredSeconds   float64 `json:"measured_seconds"`
	OtherCPUSeconds   float64 `json:"other_cpu_seconds"`
	StealCPUSeconds   float64 `json:"steal_cpu_seconds"`
	OtherCPUPct       float64 `json:"other_cpu_pct"` // of all CPUs over the measured time
	StealCPUPct       float64 `json:"steal_cpu_pct"`
	DisturbedRounds   int     `json:"disturbed_rounds"` // rounds with other CPU above 5 %
	MeasuredRoundsAll int     `json:"rounds"`
	Reruns            int     `json:"reruns"` // runs measured again
}

func otherPct(a, b machineSnap) float64 {
	capacity := b.at.Sub(a.at).Seconds() * float64(runtime.NumCPU())
	return 100 * max(otherCPU(a, b).Seconds(), 0) / capacity
}

// add accounts one measured run and returns its other-CPU percentage.
func (m *machineUse) add(a, b machineSnap) float64 {
	wall := b.at.Sub(a.at).Seconds()
	other := max(otherCPU(a, b).Seconds(), 0)
	m.MeasuredSeconds += wall
	m.OtherCPUSeconds += other
	m.StealCPUSeconds += (b.steal - a.steal).Seconds()
	m.MeasuredRoundsAll++
	total := m.MeasuredSeconds * float64(runtime.NumCPU())
	m.OtherCPUPct = 100 * m.OtherCPUSeconds / total
	m.StealCPUPct = 100 * m.StealCPUSeconds / total
	pct := otherPct(a, b)
	if pct > 5 {
		m.DisturbedRounds++
	}
	return pct
}

type memoryResult struct {
	FreshMB          float64 `json:"fresh_mb"`
	LoadPeakMB       float64 `json:"c50_load_peak_mb"`
	LoadThroughput   float64 `json:"c50_load_throughput"`
	LoadErrors       int     `json:"c50_load_errors"`
	StreamsRequested int     `json:"streams_requested"`
	StreamsOpen      int     `json:"streams_open"`
	StreamsFreshMB   float64 `json:"streams_fresh_mb"`
	StreamsMB        float64 `json:"streams_mb"`
	PerStreamKB      float64 `json:"per_stream_kb"`
	At10000MB        float64 `json:"at_10000_streams_mb"`
	StreamErrors     int     `json:"stream_errors"`
	StreamMismatch   int     `json:"stream_event_mismatch"`
	FirstError       string  `json:"first_error,omitempty"`
}

type usageResult struct {
	GatewayRequests  int    `json:"gateway_requests"` // sent to the gateway site, any outcome
	GatewayOK        int    `json:"gateway_ok"`
	AbortedStreams   int    `json:"aborted_streams"`   // of the requests, streams the client closed early
	UpstreamRequests int64  `json:"upstream_requests"` // the mock's count during gateway runs
	UsageRows        int64  `json:"usage_rows"`
	CountedBy        string `json:"counted_by,omitempty"`
	Error            string `json:"error,omitempty"`
}

// figure is one line of the table.
type figure struct {
	Name   string             `json:"name"`
	Unit   string             `json:"unit"`
	Values map[string]float64 `json:"values"`          // by target
	Ratio  *float64           `json:"ratio,omitempty"` // gateway / reverse_proxy
	Bar    string             `json:"bar,omitempty"`
	Pass   *bool              `json:"pass,omitempty"`
	// gateway_pg / gateway and gateway_pg / reverse_proxy, and the target
	// for the gateway on PostgreSQL against the one on SQLite
	RatioPG      *float64 `json:"ratio_pg_gateway,omitempty"`
	RatioPGProxy *float64 `json:"ratio_pg_proxy,omitempty"`
	PGBar        string   `json:"pg_bar,omitempty"`
	PGPass       *bool    `json:"pg_pass,omitempty"`
	// a headline figure: gateway_example / reverse_proxy_log, judged by
	// issue 21's bar, with its goal beside it
	Like bool   `json:"like_for_like,omitempty"`
	Goal string `json:"goal,omitempty"`
	// a figure of the spending-windows table: each budgets target against
	// gateway_example (budgets.go)
	Windows bool              `json:"spending_windows,omitempty"`
	Versus  map[string]versus `json:"versus_example,omitempty"`
}

func newReport(o *options, began time.Time) *report {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	r := &report{
		Started: began,
		Quick:   o.quick,
		Host: map[string]any{
			"hostname": host, "cpus": runtime.NumCPU(), "go": runtime.Version(),
			"os": runtime.GOOS + "/" + runtime.GOARCH, "kernel": strings.TrimSpace(string(kernel)),
		},
		Config: map[string]any{
			"targets": o.targets, "rounds": o.rounds, "run_seconds": o.duration.Seconds(),
			"warmup_requests": o.warmup, "open_loop_workers": openWorkers, "streams": o.streams,
			"memory_load_seconds": o.memDuration.Seconds(), "open_files_limit": fileLimit(),
			"proxy_idle_conns_per_host": o.idleConns, "scenarios": scenariosOf(o),
		},
		Memory:       map[string]*memoryResult{},
		WindowChecks: map[string]*windowsCheck{},
		pg:           o.has(gatewayPG),
	}
	if r.pg {
		r.UsagePG = &usageResult{}
	}
	return r
}

func (r *report) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if contains(r.Notes, msg) {
		return
	}
	r.Notes = append(r.Notes, msg)
	logf("note: %s", msg)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(b int64) float64         { return float64(b) / (1 << 20) }

func (t *targetResult) add(round int, res *load.Result, wall, cpu time.Duration, peak int64) {
	t.res.Merge(res)
	t.wall += wall
	t.cpu += cpu
	t.peak = max(t.peak, peak)
	t.Rounds = append(t.Rounds, roundResult{
		Round: round + 1, OK: res.OK, Errors: res.Errors, Seconds: wall.Seconds(),
		Throughput: float64(res.OK) / wall.Seconds(),
		P50ms:      ms(res.Latency.Percentile(50)), P99ms: ms(res.Latency.Percentile(99)),
		CPUSeconds: cpu.Seconds(),
	})
}

func (t *targetResult) finish() {
	r := &t.res
	t.Requests, t.OK, t.Errors, t.EventMismatch, t.FirstError = r.Requests(), r.OK, r.Errors, r.EventMismatch, r.FirstError
	t.Seconds = t.wall.Seconds()
	if t.Seconds > 0 {
		t.Throughput = float64(r.OK) / t.Seconds
	}
	t.P50ms, t.P99ms, t.MeanMs = ms(r.Latency.Percentile(50)), ms(r.Latency.Percentile(99)), ms(r.Latency.Mean())
	t.TTFEP50ms, t.TTFEP99ms = ms(r.TTFE.Percentile(50)), ms(r.TTFE.Percentile(99))
	t.CPUSeconds = t.cpu.Seconds()
	t.DBCPUSeconds = t.dbcpu.Seconds()
	if r.OK > 0 {
		t.CPUPerRequestUs = float64(t.cpu) / float64(time.Microsecond) / float64(r.OK)
		t.DBCPUPerRequestUs = float64(t.dbcpu) / float64(time.Microsecond) / float64(r.OK)
	}
	t.PeakRSSMB = mb(t.peak)
}

func (r *report) scenario(key string) *scenarioResult {
	for _, s := range r.Scenarios {
		if s.Key == key {
			return s
		}
	}
	return &scenarioResult{Targets: map[string]*targetResult{}}
}

func (r *report) add(name, unit string, v map[string]float64, b *bar) *figure {
	return r.addFigure(false, name, unit, v, b)
}

// addLike adds a headline figure of the like-for-like pair.
func (r *report) addLike(name, unit string, v map[string]float64, b *bar) *figure {
	return r.addFigure(true, name, unit, v, b)
}

func (r *report) addFigure(like bool, name, unit string, v map[string]float64, b *bar) *figure {
	f := &figure{Name: name, Unit: unit, Values: v}
	for k, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			delete(v, k)
		}
	}
	f.Ratio = ratio(v, gateway, proxy)
	if like {
		f.Like = true
		f.Ratio = ratio(v, gatewayExample, proxyLogged)
	}
	f.RatioPG = ratio(v, gatewayPG, gateway)
	f.RatioPGProxy = ratio(v, gatewayPG, proxy)
	if b != nil {
		f.Bar = b.text
		if pass, known := b.check(v, f.Ratio, like); known {
			f.Pass = &pass
		}
	}
	r.Figures = append(r.Figures, f)
	return f
}

// per collects one value per target of a scenario.
func (r *report) per(key string, get func(*targetResult) float64, targets ...string) map[string]float64 {
	out := map[string]float64{}
	for t, tr := range r.scenario(key).Targets {
		if len(targets) > 0 && !contains(targets, t) {
			continue
		}
		out[t] = get(tr)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (r *report) buildFigures(o *options) {
	p50 := func(t *targetResult) float64 { return t.P50ms }
	p99 := func(t *targetResult) float64 { return t.P99ms }
	thr := func(t *targetResult) float64 { return t.Throughput }
	cpu := func(t *targetResult) float64 { return t.CPUPerRequestUs }
	ttfe50 := func(t *targetResult) float64 { return t.TTFEP50ms }
	ttfe99 := func(t *targetResult) float64 { return t.TTFEP99ms }
	dbcpu := func(t *targetResult) float64 { return t.DBCPUPerRequestUs }
	servers := []string{proxy, gateway, gatewayPG}

	// the headline: Caddyfile.example's site and access log against
	// reverse_proxy with the same log, judged by issue 21's bar (0.95x
	// and 1.15x), with issue 34's goal beside it: at least reverse_proxy's
	// throughput and at most 1.05x its CPU, plain and streamed, at c=1 and
	// c=50
	like := []string{proxyLogged, gatewayExample}
	if r.scenario("c50").Targets[gatewayExample] != nil {
		r.addLike("c1 latency p50", "ms", r.per("c1", p50, like...), nil)
		r.addLike("c1 throughput", "req/s", r.per("c1", thr, like...), nil).Goal = "≥ 1.00×"
		r.addLike("c1 CPU per request", "µs", r.per("c1", cpu, like...), nil).Goal = "≤ 1.05×"
		r.addLike("c50 throughput", "req/s", r.per("c50", thr, like...), ratioAtLeast(0.95)).Goal = "≥ 1.00×"
		r.addLike("c50 CPU per request", "µs", r.per("c50", cpu, like...), ratioAtMost(1.15)).Goal = "≤ 1.05×"
		r.addLike("stream c1 first event p50", "ms", r.per("stream_c1", ttfe50, like...), aboveProxyAtMost(0.1, "≤ rp + 0.1 ms"))
		r.addLike("stream c1 streams/s", "1/s", r.per("stream_c1", thr, like...), nil).Goal = "≥ 1.00×"
		r.addLike("stream c1 CPU per stream", "µs", r.per("stream_c1", cpu, like...), nil).Goal = "≤ 1.05×"
		r.addLike("stream c50 streams/s", "1/s", r.per("stream_c50", thr, like...), ratioAtLeast(0.95)).Goal = "≥ 1.00×"
		r.addLike("stream c50 CPU per stream", "µs", r.per("stream_c50", cpu, like...), ratioAtMost(1.15)).Goal = "≤ 1.05×"
	}

	plain := []string{direct, proxy, gateway, gatewayPG}
	r.add("c1 latency p50", "ms", r.per("c1", p50, plain...), nil).pgTarget(false)
	r.add("c1 latency p99", "ms", r.per("c1", p99, plain...), nil)
	added := r.per("c1", p50, servers...)
	if d, ok := r.scenario("c1").Targets[direct]; ok {
		for t := range added {
			added[t] -= d.P50ms
		}
		r.add("c1 added p50 over direct", "ms", added, ratioAtMost(1.3))
	}
	r.add("c1 CPU per request", "µs", r.per("c1", cpu, servers...), nil)
	if r.pg {
		r.add("c1 database CPU per request", "µs", r.per("c1", dbcpu, gatewayPG), nil)
	}
	r.add("c50 throughput", "req/s", r.per("c50", thr, plain...), ratioAtLeast(0.85)).pgTarget(true)
	r.add("c50 latency p50", "ms", r.per("c50", p50, plain...), nil)
	r.add("c50 latency p99", "ms", r.per("c50", p99, plain...), nil)
	r.add("c50 CPU per request", "µs", r.per("c50", cpu, servers...), ratioAtMost(1.3)).pgTarget(false)
	if r.pg {
		r.add("c50 database CPU per request", "µs", r.per("c50", dbcpu, gatewayPG), nil)
	}
	for _, rate := range []string{"1000", "3000"} {
		key := "rate" + rate
		r.add(rate+"/s achieved", "req/s", r.per(key, thr, plain...), nil)
		r.add(rate+"/s latency p50", "ms", r.per(key, p50, plain...), nil)
		r.add(rate+"/s latency p99", "ms", r.per(key, p99, plain...), nil)
		r.add(rate+"/s CPU per request", "µs", r.per(key, cpu, servers...), nil)
	}
	for _, c := range []string{"c1", "c50"} {
		key := "stream_" + c
		var ttfeBar *bar
		if c == "c1" {
			ttfeBar = aboveProxyAtMost(0.2, "≤ rp + 0.2 ms")
		}
		r.add("stream "+c+" first event p50", "ms", r.per(key, ttfe50, plain...), ttfeBar)
		r.add("stream "+c+" first event p99", "ms", r.per(key, ttfe99, plain...), nil)
		r.add("stream "+c+" total p50", "ms", r.per(key, p50, plain...), nil)
		var sBar *bar
		if c == "c50" {
			sBar = ratioAtLeast(0.85)
		}
		f := r.add("stream "+c+" streams/s", "1/s", r.per(key, thr, plain...), sBar)
		if c == "c50" {
			f.pgTarget(true)
		}
		r.add("stream "+c+" CPU per stream", "µs", r.per(key, cpu, servers...), nil)
		if r.pg && c == "c50" {
			r.add("stream c50 database CPU per stream", "µs", r.per(key, dbcpu, gatewayPG), nil)
		}
	}

	mismatch := map[string]float64{}
	errs := map[string]float64{}
	for _, sr := range r.Scenarios {
		if sr.Key == "overload" {
			continue
		}
		for t, tr := range sr.Targets {
			mismatch[t] += float64(tr.EventMismatch + tr.DiscardedMismatch)
			errs[t] += float64(tr.Errors + tr.DiscardedErrors)
		}
	}
	for t, m := range r.Memory {
		mismatch[t] += float64(m.StreamMismatch)
		errs[t] += float64(m.StreamErrors + m.LoadErrors)
	}
	if _, ok := errs[gatewayExample]; ok {
		pick := func(m map[string]float64) map[string]float64 {
			out := map[string]float64{}
			for _, t := range like {
				if x, ok := m[t]; ok {
					out[t] = x
				}
			}
			return out
		}
		r.addLike("failed requests or wrong streams", "count", pick(sumOf(errs, mismatch)), allZero)
	}
	r.buildWindowFigures(sumOf(errs, mismatch))
	r.add("streams with events ≠ upstream's", "count", mismatch, allZero)
	r.add("failed requests (all runs)", "count", errs, allZero)

	mem := func(get func(*memoryResult) float64) map[string]float64 {
		out := map[string]float64{}
		for t, m := range r.Memory {
			out[t] = get(m)
		}
		return out
	}
	if len(r.Memory) > 0 {
		n := 0
		for _, m := range r.Memory {
			n = max(n, m.StreamsRequested)
		}
		r.add("RSS fresh", "MB", mem(func(m *memoryResult) float64 { return m.FreshMB }), nil)
		r.add("RSS under c50 load", "MB", mem(func(m *memoryResult) float64 { return m.LoadPeakMB }), ratioAtMost(1.5))
		r.add("streams held open", "count", mem(func(m *memoryResult) float64 { return float64(m.StreamsOpen) }), nil)
		r.add(fmt.Sprintf("RSS with %d open streams", n), "MB", mem(func(m *memoryResult) float64 { return m.StreamsMB }), nil)
		r.add("memory per open stream", "KB", mem(func(m *memoryResult) float64 { return m.PerStreamKB }), nil)
		name := "RSS with 10,000 open streams"
		if n != 10000 {
			name += " (extrapolated)"
		}
		r.add(name, "MB", mem(func(m *memoryResult) float64 { return m.At10000MB }), gatewayAtMost(600, "≤ 600 MB"))
	}

	if o.has(gateway) || o.has(gatewayExample) {
		u := r.Usage
		if tr, ok := r.scenario("overload").Targets[gateway]; ok {
			r.add("overload: answered/s", "req/s", map[string]float64{gateway: tr.Throughput}, nil)
			r.add("overload: latency p99", "ms", map[string]float64{gateway: tr.P99ms}, nil)
			r.add("overload: failed requests", "count", map[string]float64{gateway: float64(tr.Errors)}, nil)
		}
		r.add("gateway requests served", "count", map[string]float64{gateway: float64(u.GatewayRequests)}, nil)
		r.add("  of which closed early by the client", "count", map[string]float64{gateway: float64(u.AbortedStreams)}, nil)
		r.add("upstream requests by the gateway", "count", map[string]float64{gateway: float64(u.UpstreamRequests)}, nil)
		r.add("usage rows written", "count", map[string]float64{gateway: float64(u.UsageRows)},
			&bar{"= requests served", func(v map[string]float64, _ *float64, _ bool) (bool, bool) {
				return v[gateway] == float64(u.GatewayRequests), u.UsageRows >= 0
			}})
	}
	if u := r.UsagePG; u != nil {
		one := func(x float64) map[string]float64 { return map[string]float64{gatewayPG: x} }
		r.add("gateway_pg requests served", "count", one(float64(u.GatewayRequests)), nil)
		r.add("upstream requests by gateway_pg", "count", one(float64(u.UpstreamRequests)), nil)
		r.add("gateway_pg usage rows written", "count", one(float64(u.UsageRows)),
			&bar{"= requests served", func(v map[string]float64, _ *float64, _ bool) (bool, bool) {
				return v[gatewayPG] == float64(u.GatewayRequests), u.UsageRows >= 0
			}})
		if w := r.Database; w != nil {
			r.add("database commits per request", "count", one(w.CommitsPerRequest), nil)
			r.add("database rows inserted per request", "count", one(w.InsertedPerRequest), nil)
			r.add("database rows updated per request", "count", one(w.UpdatedPerRequest), nil)
			r.add("database rows deleted per request", "count", one(w.DeletedPerRequest), nil)
		}
	}

	r.Pass = true
	for _, f := range r.Figures {
		if f.Pass != nil && !*f.Pass || f.PGPass != nil && !*f.PGPass {
			r.Pass = false
		}
	}
}

func sumOf(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

func format(v float64, unit string) string {
	switch unit {
	case "count":
		if v != math.Trunc(v) {
			return fmt.Sprintf("%.2f", v) // per request
		}
		return fmt.Sprintf("%.0f", v)
	case "ms":
		return fmt.Sprintf("%.3f", v)
	case "MB", "KB":
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func (r *report) printTable(w io.Writer) {
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "\nGateway benchmark (%s, %d CPUs, %s, %s)\n\n", mode, r.Host["cpus"], r.Host["go"], r.Finished.Sub(r.Started).Round(time.Second))
	r.printHeadline(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	targets, header := []string{direct, proxy, gateway}, "figure\tunit\tdirect\treverse_proxy\tgateway\tgw/rp\tbar\tresult\t"
	if r.pg {
		targets = append(targets, gatewayPG)
		header = "figure\tunit\tdirect\treverse_proxy\tgateway\tgateway_pg\tgw/rp\tpg/rp\tpg/gw\tbar\tresult\tpg target\tresult\t"
	}
	fmt.Fprintln(tw, header)
	ratioCell := func(q *float64) string {
		if q == nil {
			return ""
		}
		return fmt.Sprintf("%.2f×", *q)
	}
	for _, f := range r.Figures {
		if f.Like || f.Windows || len(f.Values) == 0 {
			continue // a scenario left out (-scenarios)
		}
		cells := []string{f.Name, f.Unit}
		for _, t := range targets {
			if v, ok := f.Values[t]; ok {
				cells = append(cells, format(v, f.Unit))
			} else {
				cells = append(cells, "-")
			}
		}
		cells = append(cells, ratioCell(f.Ratio))
		if r.pg {
			cells = append(cells, ratioCell(f.RatioPGProxy), ratioCell(f.RatioPG))
		}
		cells = append(cells, f.Bar, verdictCell(f.Pass, f.Bar))
		if r.pg {
			cells = append(cells, f.PGBar, verdictCell(f.PGPass, f.PGBar))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	failed := 0
	for _, f := range r.Figures {
		if f.Pass != nil && !*f.Pass {
			failed++
		}
		if f.PGPass != nil && !*f.PGPass {
			failed++
		}
	}
	if m := r.Machine; m.MeasuredRoundsAll > 0 {
		fmt.Fprintf(w, "\nOther processes used %.1f%% of the CPUs during the measured runs (steal %.1f%%); %d of %d runs above 5%%; %d runs measured again.\n",
			m.OtherCPUPct, m.StealCPUPct, m.DisturbedRounds, m.MeasuredRoundsAll, m.Reruns)
		if m.OtherCPUPct > 5 || m.DisturbedRounds*5 > m.MeasuredRoundsAll {
			fmt.Fprintln(w, "The machine was busy with other work: treat the figures as noisy and rerun on a quiet machine.")
		}
	}
	if failed == 0 {
		fmt.Fprintln(w, "\nEvery bar met.")
	} else {
		fmt.Fprintf(w, "\n%d bar(s) not met.\n", failed)
	}
	if r.Usage.Error != "" {
		fmt.Fprintln(w, "usage rows:", r.Usage.Error)
	}
	if r.UsagePG != nil && r.UsagePG.Error != "" {
		fmt.Fprintln(w, "gateway_pg usage rows:", r.UsagePG.Error)
	}
	if d := r.Database; d != nil {
		fmt.Fprintf(w, "gateway_pg database over the run (start-up and shutdown included), %d requests: %d commits, %d rollbacks, %d rows inserted, %d updated, %d deleted.\n",
			d.Requests, d.Delta.Commits, d.Delta.Rollbacks, d.Delta.Inserted, d.Delta.Updated, d.Delta.Deleted)
	}
	for _, s := range r.Scenarios {
		for t, tr := range s.Targets {
			if tr.FirstError != "" {
				fmt.Fprintf(w, "first error, %s on %s: %s\n", s.Key, t, tr.FirstError)
			}
		}
	}
	for t, m := range r.Memory {
		if m.FirstError != "" {
			fmt.Fprintf(w, "first error, open streams on %s: %s\n", t, m.FirstError)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// figuresWhere are the report's figures that keep holds for, in order.
func (r *report) figuresWhere(keep func(*figure) bool) []*figure {
	var figs []*figure
	for _, f := range r.Figures {
		if keep(f) {
			figs = append(figs, f)
		}
	}
	return figs
}

// printHeadline is the like-for-like table: Caddyfile.example's site and
// access log against reverse_proxy with the same log block.
func (r *report) printHeadline(w io.Writer) {
	figs := r.figuresWhere(func(f *figure) bool { return f.Like })
	if len(figs) == 0 {
		r.printWindows(w)
		return
	}
	fmt.Fprintln(w, "Like for like: Caddyfile.example's site and access log, against reverse_proxy with the same log block")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tunit\treverse_proxy+log\tgateway (example)\tgw/rp\tbar\tresult\tgoal\t")
	for _, f := range figs {
		cells := []string{f.Name, f.Unit}
		for _, t := range []string{proxyLogged, gatewayExample} {
			if v, ok := f.Values[t]; ok {
				cells = append(cells, format(v, f.Unit))
			} else {
				cells = append(cells, "-")
			}
		}
		q := ""
		if f.Ratio != nil {
			q = fmt.Sprintf("%.2f×", *f.Ratio)
		}
		cells = append(cells, q, f.Bar, verdictCell(f.Pass, f.Bar), f.Goal)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w)
	r.printWindows(w)
	fmt.Fprintln(w, "Without access logs, the gateway's own route only:")
	fmt.Fprintln(w)
}

// verdictCell is a figure's result column: n/a when its bar could not be
// judged (a target left out).
func verdictCell(pass *bool, bar string) string {
	switch {
	case pass == nil && bar != "":
		return "n/a"
	case pass == nil:
		return ""
	case *pass:
		return "pass"
	default:
		return "FAIL"
	}
}

func (r *report) save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := r.Started.UTC().Format("20060102-150405")
	if r.Quick {
		name += "-quick"
	}
	path := filepath.Join(dir, name+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}
