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
		1000:  2 * time.Second,        // 2,000 requests
		2000:  time.Second,            // 2,000 requests
		200:   2 * time.Second,        // at most 2 s: 400 requests
		20000: 500 * time.Millisecond, // at least 0.5 s: 10,000 requests
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
