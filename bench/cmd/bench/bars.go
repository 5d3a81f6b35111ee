package main

import "fmt"

// bar is a pass rule over a figure's values; check reports known false
// when the values it needs were not measured (a target left out).
type bar struct {
	text  string
	check func(v map[string]float64, ratio *float64, like bool) (pass, known bool)
}

func ratioAtLeast(x float64) *bar {
	return &bar{fmt.Sprintf("≥ %.2f×", x), func(_ map[string]float64, r *float64, _ bool) (bool, bool) {
		return r != nil && *r >= x, r != nil
	}}
}

func ratioAtMost(x float64) *bar {
	return &bar{fmt.Sprintf("≤ %.2f×", x), func(_ map[string]float64, r *float64, _ bool) (bool, bool) {
		return r != nil && *r <= x, r != nil
	}}
}

func gatewayAtMost(x float64, text string) *bar {
	return &bar{text, func(v map[string]float64, _ *float64, _ bool) (bool, bool) {
		g, ok := v[gateway]
		return ok && g <= x, ok
	}}
}

func aboveProxyAtMost(x float64, text string) *bar {
	return &bar{text, func(v map[string]float64, _ *float64, like bool) (bool, bool) {
		g, ok1 := v[gateway]
		p, ok2 := v[proxy]
		if like {
			g, ok1 = v[gatewayExample]
			p, ok2 = v[proxyLogged]
		}
		return ok1 && ok2 && g-p <= x, ok1 && ok2
	}}
}

var allZero = &bar{"= 0", func(v map[string]float64, _ *float64, _ bool) (bool, bool) {
	for _, x := range v {
		if x != 0 {
			return false, true
		}
	}
	return true, len(v) > 0
}}

// ratio is v[a] / v[b] when both were measured.
func ratio(v map[string]float64, a, b string) *float64 {
	x, ok1 := v[a]
	y, ok2 := v[b]
	if !ok1 || !ok2 || y == 0 {
		return nil
	}
	q := x / y
	return &q
}

// pgTarget sets the gateway_pg target on a figure (issue 34): at least the
// SQLite gateway's throughput and at most 5 % more of its CPU and latency,
// the hot path not waiting on the database.
func (f *figure) pgTarget(higherIsBetter bool) {
	if higherIsBetter {
		f.PGBar = "≥ 1.00× gw"
	} else {
		f.PGBar = "≤ 1.05× gw"
	}
	if f.RatioPG != nil {
		pass := *f.RatioPG <= 1.05
		if higherIsBetter {
			pass = *f.RatioPG >= 1.00
		}
		f.PGPass = &pass
	}
}
