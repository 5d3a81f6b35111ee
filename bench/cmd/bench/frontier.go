package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

// The latency frontier: for each server target, the highest open-loop rate
// whose p99 stays under 1, 5 and 10 ms, the figure other gateways publish.
// Each target's search (load.Frontier) ramps the rate up, then bisects each
// bound's bracket; each step is a short open-loop run whose latency counts
// from the scheduled send time. The targets take turns step by step, in an
// order that changes from step to step, so drift hits all alike.

// frontierConfig is the search's settings, by mode.
type frontierConfig struct {
	bounds   []time.Duration
	requests int           // a step lasts requests/rate...
	minStep  time.Duration // ...but at least this
	maxStep  time.Duration // ...and at most this
	start    float64
	minRate  float64
	maxRate  float64
	factor   float64
	prec     float64
	maxSteps int           // per target
	budget   time.Duration // no round starts after this, warm-up included
}

func frontierConfigFor(quick bool) frontierConfig {
	c := frontierConfig{
		bounds:   []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond},
		requests: 2000, minStep: 500 * time.Millisecond, maxStep: 1500 * time.Millisecond,
		start: 1000, minRate: 200, maxRate: 50000, factor: 2,
		prec: 0.05, maxSteps: 20, budget: 70 * time.Second,
	}
	if quick {
		c.requests, c.minStep, c.maxStep = 1000, 250*time.Millisecond, 500*time.Millisecond
		c.prec, c.maxSteps, c.budget = 0.10, 16, 30*time.Second
	}
	return c
}

// stepDuration is long enough for a meaningful p99 (of 2,000 requests it
// is the 20th slowest) and short enough to bound the whole search.
func (c frontierConfig) stepDuration(rate float64) time.Duration {
	d := time.Duration(float64(c.requests) / rate * float64(time.Second))
	return min(max(d, c.minStep), c.maxStep)
}

func (c frontierConfig) search() *load.Frontier {
	return &load.Frontier{Bounds: c.bounds, Start: c.start, Min: c.minRate, Max: c.maxRate,
		Factor: c.factor, Precision: c.prec, MaxSteps: c.maxSteps}
}

// frontierResult is the frontier in the JSON.
type frontierResult struct {
	BoundsMs        []float64                  `json:"p99_bounds_ms"`
	RequestsPerStep int                        `json:"requests_per_step"`
	MinStepSeconds  float64                    `json:"min_step_seconds"`
	MaxStepSeconds  float64                    `json:"max_step_seconds"`
	Precision       float64                    `json:"precision"` // a bracket hi/lo within 1+precision is done
	MinRate         float64                    `json:"min_rate"`
	MaxRate         float64                    `json:"max_rate"`
	MaxSteps        int                        `json:"max_steps_per_target"`
	Seconds         float64                    `json:"seconds"`
	CutByBudget     bool                       `json:"cut_by_time_budget,omitempty"`
	Targets         map[string]*frontierTarget `json:"targets"`
	Ratios          []frontierRatio            `json:"ratios,omitempty"`

	order []string // targets as selected
}

type frontierTarget struct {
	Held              []frontierHeld `json:"held"` // one per bound
	Steps             []frontierStep `json:"steps"`
	Failed            int            `json:"failed_requests"`
	DiscardedFailures int            `json:"discarded_failed_requests,omitempty"` // in steps measured again
	FirstError        string         `json:"first_error,omitempty"`
}

// frontierHeld is one bound's answer: the highest rate that held it below
// the lowest rate that broke it.
type frontierHeld struct {
	BoundMs float64 `json:"p99_bound_ms"`
	Rate    float64 `json:"rate"`                // 0: no rate tried held it
	Broken  float64 `json:"broken_at,omitempty"` // absent: no rate tried broke it
	Within  bool    `json:"within_precision"`
}

type frontierStep struct {
	Rate        float64 `json:"rate"`
	Seconds     float64 `json:"seconds"` // the schedule's length
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	Answered    float64 `json:"answered_per_second"` // over the schedule and its tail
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	OtherCPUPct float64 `json:"other_cpu_pct"`
}

// frontierRatio is one target's frontier over another's, per bound (null
// where either held nothing).
type frontierRatio struct {
	Of     string     `json:"of"`
	Over   string     `json:"over"`
	Ratios []*float64 `json:"ratios"`
}

// frontierPairs are the ratios the table prints, when both ran.
var frontierPairs = [][2]string{{gateway, proxy}, {gatewayExample, proxyLogged}, {gatewayPG, proxy}}

// frontierTargets are the selected servers, in -targets order: direct is
// the mock (the load generator's floor, not a server under test) and the
// spending-windows targets are gateway_example's site.
func (o *options) frontierTargets() []string {
	var out []string
	for _, t := range o.targets {
		switch t {
		case proxy, gateway, proxyLogged, gatewayExample, gatewayPG:
			out = append(out, t)
		}
	}
	return out
}

func (b *bench) runFrontier(ctx context.Context) error {
	o, cfg := b.o, frontierConfigFor(b.o.quick)
	targets := o.frontierTargets()
	if len(targets) == 0 {
		return nil
	}
	began := time.Now()
	fr := newFrontierResult(cfg, targets)
	b.report.Frontier = fr
	searches := map[string]*load.Frontier{}
	for _, t := range targets {
		searches[t] = cfg.search()
		// a run of only the frontier (-scenarios frontier) finds the
		// targets cold
		b.track(t, func() *load.Result { return load.ClosedLoopN(ctx, 8, o.warmup, b.clients[t].Chat) })
	}
	for step := 0; ; step++ {
		var active []string
		for _, t := range targets {
			if _, ok := searches[t].Next(); ok {
				active = append(active, t)
			}
		}
		if len(active) == 0 {
			break
		}
		if time.Since(began) > cfg.budget {
			fr.CutByBudget = true
			b.report.note("the latency frontier stopped at its time budget (%v) with brackets open: %s", cfg.budget, strings.Join(active, ", "))
			break
		}
		for _, t := range order(active, step) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rate, _ := searches[t].Next()
			st := b.frontierStep(ctx, cfg, t, rate, fr.Targets[t])
			searches[t].Record(load.FrontierStep{Rate: rate, Requests: st.Requests, Failed: st.Failed,
				P99: time.Duration(st.P99ms * float64(time.Millisecond))})
		}
	}
	fr.Seconds = time.Since(began).Seconds()
	fr.finish(searches, cfg)
	return nil
}

func newFrontierResult(cfg frontierConfig, targets []string) *frontierResult {
	fr := &frontierResult{
		RequestsPerStep: cfg.requests, MinStepSeconds: cfg.minStep.Seconds(), MaxStepSeconds: cfg.maxStep.Seconds(),
		Precision: cfg.prec, MinRate: cfg.minRate, MaxRate: cfg.maxRate, MaxSteps: cfg.maxSteps,
		Targets: map[string]*frontierTarget{}, order: targets,
	}
	for _, bd := range cfg.bounds {
		fr.BoundsMs = append(fr.BoundsMs, ms(bd))
	}
	for _, t := range targets {
		fr.Targets[t] = &frontierTarget{}
	}
	return fr
}

// frontierStep runs one target at one rate, measuring it again (within the
// bench's reruns) when other processes took the CPUs meanwhile.
func (b *bench) frontierStep(ctx context.Context, cfg frontierConfig, t string, rate float64, ft *frontierTarget) frontierStep {
	dur := cfg.stepDuration(rate)
	for attempt := 1; ; attempt++ {
		// what the step before left running (a usage batch, a backlog)
		// belongs to neither
		quiesceFor(b.caddy.pid(), 100*time.Millisecond, time.Second)
		if b.pgCaddy != nil {
			quiesceFor(b.pgCaddy.pid(), 100*time.Millisecond, time.Second)
		}
		snap := b.snap()
		res := b.track(t, func() *load.Result {
			return load.OpenLoop(ctx, rate, dur, openWorkers, b.clients[t].Chat)
		})
		after := b.snap()
		other := otherPct(snap, after)
		st := frontierStep{
			Rate: rate, Seconds: dur.Seconds(), Requests: res.Requests(), Failed: res.Errors,
			Answered: float64(res.OK) / max(res.Elapsed, dur).Seconds(),
			P50ms:    ms(res.Latency.Percentile(50)), P99ms: ms(res.Latency.Percentile(99)), OtherCPUPct: other,
		}
		logf("frontier    %-13s %6.0f/s for %.2fs: p50 %7.3fms  p99 %7.3fms  errors %d  other CPU %3.0f%% %s",
			t, rate, dur.Seconds(), st.P50ms, st.P99ms, res.Errors, other, res.FirstError)
		if ft.FirstError == "" {
			ft.FirstError = res.FirstError
		}
		if other > rerunAbove && b.reruns > 0 && attempt <= maxRerunsPerRun && ctx.Err() == nil {
			time.Sleep(time.Second)
			b.reruns--
			b.report.Machine.Reruns++
			ft.DiscardedFailures += res.Errors
			logf("frontier    %-13s %6.0f/s disturbed by other processes; running it again", t, rate)
			continue
		}
		b.report.Machine.add(snap, after)
		ft.Steps = append(ft.Steps, st)
		ft.Failed += res.Errors
		return st
	}
}

// finish reads each bound's answer off the searches, and the ratios.
func (fr *frontierResult) finish(searches map[string]*load.Frontier, cfg frontierConfig) {
	for t, s := range searches {
		ft := fr.Targets[t]
		for i, bd := range cfg.bounds {
			lo, hi := s.Bracket(i)
			h := frontierHeld{BoundMs: ms(bd), Rate: lo}
			if !math.IsInf(hi, 1) {
				h.Broken = hi
			}
			h.Within = lo > 0 && hi/lo <= 1+cfg.prec || // found
				lo == 0 && hi <= cfg.minRate || // nothing held it
				math.IsInf(hi, 1) && lo >= cfg.maxRate // everything did
			ft.Held = append(ft.Held, h)
		}
	}
	for _, p := range frontierPairs {
		a, ok1 := fr.Targets[p[0]]
		b, ok2 := fr.Targets[p[1]]
		if !ok1 || !ok2 {
			continue
		}
		r := frontierRatio{Of: p[0], Over: p[1]}
		for i := range a.Held {
			var q *float64
			if x, y := a.Held[i].Rate, b.Held[i].Rate; x > 0 && y > 0 {
				v := x / y
				q = &v
			}
			r.Ratios = append(r.Ratios, q)
		}
		fr.Ratios = append(fr.Ratios, r)
	}
}

// cell is a bound's answer in the table: the rate, "< r" when the lowest
// rate tried broke it, "≥ r" when the highest held it, "lo–hi" when the
// step limit or the time budget left the bracket open.
func (h frontierHeld) cell() string {
	switch {
	case h.Rate == 0:
		return fmt.Sprintf("< %.0f", h.Broken)
	case h.Broken == 0:
		return fmt.Sprintf("≥ %.0f", h.Rate)
	case !h.Within:
		return fmt.Sprintf("%.0f–%.0f", h.Rate, h.Broken)
	}
	return fmt.Sprintf("%.0f", h.Rate)
}

func printFrontier(w io.Writer, fr *frontierResult) {
	if fr == nil || len(fr.Targets) == 0 {
		return
	}
	fmt.Fprintf(w, "\nLatency frontier: the highest open-loop rate (requests/s) each target held with p99 under each bound\n")
	fmt.Fprintf(w, "(steps of %d requests, %.2g–%.2g s each; a step with a failed request holds nothing; brackets within %.0f %%; %.0f s in all)\n",
		fr.RequestsPerStep, fr.MinStepSeconds, fr.MaxStepSeconds, 100*fr.Precision, fr.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"target"}
	for _, bd := range fr.BoundsMs {
		header = append(header, fmt.Sprintf("p99 < %g ms", bd))
	}
	fmt.Fprintln(tw, strings.Join(append(header, "steps", "failed"), "\t")+"\t")
	for _, t := range fr.order {
		ft := fr.Targets[t]
		cells := []string{t}
		for _, h := range ft.Held {
			cells = append(cells, h.cell())
		}
		cells = append(cells, fmt.Sprint(len(ft.Steps)), fmt.Sprint(ft.Failed+ft.DiscardedFailures))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for _, r := range fr.Ratios {
		cells := []string{r.Of + " / " + r.Over}
		for _, q := range r.Ratios {
			if q == nil {
				cells = append(cells, "-")
			} else {
				cells = append(cells, fmt.Sprintf("%.2f×", *q))
			}
		}
		fmt.Fprintln(tw, strings.Join(append(cells, "", ""), "\t")+"\t")
	}
	tw.Flush()
	for _, t := range fr.order {
		if e := fr.Targets[t].FirstError; e != "" {
			fmt.Fprintf(w, "first error, frontier on %s: %s\n", t, e)
		}
	}
}
