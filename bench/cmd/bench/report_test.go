package main

import (
	"slices"
	"strings"
	"testing"
)

func TestOrderInterleaves(t *testing.T) {
	targets := []string{direct, proxy, gateway}
	firsts := map[string]bool{}
	for round := range 3 {
		o := order(targets, round)
		if len(o) != 3 || !slices.Contains(o, direct) || !slices.Contains(o, proxy) || !slices.Contains(o, gateway) {
			t.Fatalf("round %d: %v", round, o)
		}
		firsts[o[0]] = true
	}
	if len(firsts) != 3 {
		t.Errorf("every target should lead one of three rounds: %v", firsts)
	}
}

func TestBars(t *testing.T) {
	r := &report{}
	r.add("throughput", "req/s", map[string]float64{proxy: 1000, gateway: 900}, ratioAtLeast(0.85))
	r.add("cpu", "µs", map[string]float64{proxy: 100, gateway: 140}, ratioAtMost(1.3))
	r.add("ttfe", "ms", map[string]float64{proxy: 0.5, gateway: 0.65}, aboveProxyAtMost(0.2, ""))
	r.add("no gateway", "req/s", map[string]float64{proxy: 1000}, ratioAtLeast(0.85))
	r.add("errors", "count", map[string]float64{proxy: 0, gateway: 0}, allZero)
	want := []string{"pass", "FAIL", "pass", "n/a", "pass"}
	for i, f := range r.Figures {
		got := "n/a"
		if f.Pass != nil {
			got = map[bool]string{true: "pass", false: "FAIL"}[*f.Pass]
		}
		if got != want[i] {
			t.Errorf("%s: %s, want %s", f.Name, got, want[i])
		}
	}
	if r := *r.Figures[0].Ratio; r != 0.9 {
		t.Errorf("ratio %v", r)
	}
	var b strings.Builder
	r.printTable(&b)
	if !strings.Contains(b.String(), "0.90×") || !strings.Contains(b.String(), "FAIL") {
		t.Errorf("table:\n%s", b.String())
	}
}
