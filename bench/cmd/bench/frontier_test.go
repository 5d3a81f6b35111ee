package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

// A step's length gives a meaningful p99 where the rate allows and stays
// within its bounds where it does not.
func TestFrontierStepDuration(t *testing.T) {
	c := frontierConfigFor(false)
	for rate, want := range map[float64]time.Duration{
		2000:  time.Second,             // 2,000 requests
		1000:  1500 * time.Millisecond, // at most 1.5 s: 1,500 requests
		200:   1500 * time.Millisecond, // 300 requests
		20000: 500 * time.Millisecond,  // at least 0.5 s: 10,000 requests
	} {
		if got := c.stepDuration(rate); got != want {
			t.Errorf("stepDuration(%v) = %v, want %v", rate, got, want)
		}
	}
	q := frontierConfigFor(true)
	if q.budget >= c.budget || q.maxStep > c.maxStep || q.maxSteps > c.maxSteps {
		t.Errorf("quick mode should be shorter: %+v against %+v", q, c)
	}
}

// The answers read off finished searches: a found rate, a bound that
// nothing held, one everything held, one the step limit left open, and the
// ratios of the pairs that both ran.
func TestFrontierResult(t *testing.T) {
	cfg := frontierConfigFor(true)
	steps := func(pts ...[2]float64) *load.Frontier {
		f := cfg.search()
		for _, p := range pts {
			f.Record(load.FrontierStep{Rate: p[0], Requests: 1000, P99: time.Duration(p[1] * float64(time.Millisecond))})
		}
		return f
	}
	fr := newFrontierResult(cfg, []string{proxy, gateway, gatewayExample})
	searches := map[string]*load.Frontier{
		// 1 ms: 2,000 held, 2,100 broke; 5 and 10 ms held up to 4,000, 8,000 broke: open
		proxy: steps([2]float64{1000, 0.5}, [2]float64{2000, 0.9}, [2]float64{4000, 3}, [2]float64{8000, 50}, [2]float64{2100, 1.2}),
		// 1 ms broken even at the lowest rate, 5 ms open, 10 ms held at the highest
		gateway: steps([2]float64{200, 2}, [2]float64{50000, 9}),
		// its pair did not run: no ratio
		gatewayExample: steps([2]float64{1000, 0.5}),
	}
	fr.finish(searches, cfg)

	got := func(target string) []string {
		var cells []string
		for _, h := range fr.Targets[target].Held {
			cells = append(cells, h.cell())
		}
		return cells
	}
	if want := []string{"2000", "4000–8000", "4000–8000"}; !slices.Equal(got(proxy), want) {
		t.Errorf("reverse_proxy: %v, want %v", got(proxy), want)
	}
	if want := []string{"< 200", "200–50000", "≥ 50000"}; !slices.Equal(got(gateway), want) {
		t.Errorf("gateway: %v, want %v", got(gateway), want)
	}
	if len(fr.Ratios) != 1 || fr.Ratios[0].Of != gateway || fr.Ratios[0].Over != proxy {
		t.Fatalf("ratios: %+v", fr.Ratios)
	}
	r := fr.Ratios[0].Ratios
	if r[0] != nil || r[1] == nil || *r[1] != 200.0/4000 || r[2] == nil || *r[2] != 50000.0/4000 {
		t.Errorf("gateway/reverse_proxy ratios: %v", r)
	}

	var b strings.Builder
	printFrontier(&b, fr)
	for _, want := range []string{"p99 < 1 ms", "p99 < 10 ms", "gateway / reverse_proxy", "12.50×", "4000–8000", "< 200", "steps of 1000 requests"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table has no %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(fr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"rate":2000,"broken_at":2100,"within_precision":true`) {
		t.Errorf("JSON: %s", js)
	}
}

func TestScenariosFlag(t *testing.T) {
	var o options
	if err := o.setScenarios("all"); err != nil || !o.runs("c50") || !o.runs("frontier") {
		t.Errorf("all: %v %v", err, o.scenarios)
	}
	if err := o.setScenarios("frontier, c1"); err != nil || !o.runs("frontier") || !o.runs("c1") || o.runs("c50") || o.runs("memory") {
		t.Errorf("frontier,c1: %v %v", err, o.scenarios)
	}
	if err := o.setScenarios("frontiers"); err == nil {
		t.Error("an unknown scenario is accepted")
	}
}

func TestFrontierTargets(t *testing.T) {
	o := options{targets: []string{direct, gatewayExample, proxy, gatewayBudgets, gateway, proxyLogged}}
	if got, want := o.frontierTargets(), []string{gatewayExample, proxy, gateway, proxyLogged}; !slices.Equal(got, want) {
		t.Errorf("frontier targets %v, want %v", got, want)
	}
}

// The search's length by its settings, not measured: against a fake server
// whose p99 grows as a queue's does, each step's schedule (its overload tail
// included) and the settling before it, per target. Four targets must fit a
// full run's 60-90 s and a quick run's half of it.
func TestFrontierLength(t *testing.T) {
	for _, quick := range []bool{false, true} {
		cfg := frontierConfigFor(quick)
		limit := 90 * time.Second / 4
		if quick {
			limit = 8 * time.Second
		}
		for _, capacity := range []float64{800, 1500, 3000, 6000, 12000, 24000} {
			f := cfg.search()
			var total time.Duration
			for {
				rate, ok := f.Next()
				if !ok {
					break
				}
				d := cfg.stepDuration(rate)
				p99 := time.Second
				if rate < capacity {
					p99 = time.Duration(float64(400*time.Microsecond) / (1 - rate/capacity))
				} else {
					d += time.Duration(float64(d) * (rate - capacity) / capacity) // the backlog
				}
				total += d + 150*time.Millisecond
				f.Record(load.FrontierStep{Rate: rate, Requests: 1000, P99: p99})
			}
			if total > limit {
				t.Errorf("quick %v, capacity %v/s: %d steps take %v, more than %v", quick, capacity, len(f.Steps), total, limit)
			}
			for i := range cfg.bounds {
				if lo, hi := f.Bracket(i); hi/lo > 1+cfg.prec {
					t.Errorf("quick %v, capacity %v/s: bound %d left open at [%v, %v)", quick, capacity, i, lo, hi)
				}
			}
		}
	}
}
