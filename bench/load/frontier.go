package load

import (
	"math"
	"time"
)

// Frontier searches, for one target, the highest open-loop rate whose p99
// latency stays under each of a few bounds: a geometric ramp from Start
// until a step breaks the loosest bound (or Max is reached), then a
// bisection of each bound's bracket, down towards Min when even the first
// step broke it. Every step informs every bound, so the brackets of the
// tighter bounds narrow while the looser ones are searched. It only decides
// rates; the caller runs each step and records it, so it can interleave
// several targets' searches and a test can stand in for the server.
//
// Noise makes p99 against rate not quite monotone. A bound's frontier is
// therefore the highest rate that held it below the lowest rate that broke
// it: a fluke at a low rate makes the answer lower, never higher. Such a
// fluke is tried once more (a rate that broke a bound a higher rate held),
// and a rate holds a bound when either of its runs did: one stall in a
// short run would otherwise decide the answer.
type Frontier struct {
	Bounds    []time.Duration // p99 bounds, ascending
	Start     float64         // the first rate, requests per second
	Min       float64         // rates below it are not tried
	Max       float64         // the ramp stops there
	Factor    float64         // the ramp's (and the descent's) multiplier, > 1
	Precision float64         // a bracket whose hi/lo is within 1+Precision is done
	MaxSteps  int             // the search stops after this many steps

	Steps []FrontierStep
}

// FrontierStep is one run at one rate.
type FrontierStep struct {
	Rate     float64
	Requests int // requests that got an outcome
	Failed   int
	P99      time.Duration
}

// Holds reports whether the step kept its p99 under bound: a step with a
// failed request, or with none at all, holds nothing.
func (s FrontierStep) Holds(bound time.Duration) bool {
	return s.Failed == 0 && s.Requests > 0 && s.P99 < bound
}

// Record adds a step's outcome.
func (f *Frontier) Record(s FrontierStep) { f.Steps = append(f.Steps, s) }

// Bracket is bound i's bracket: hi the lowest rate that broke it (+Inf
// when none did), lo the highest rate below hi that held it (0 when none
// did). The frontier is lo, at most hi.
func (f *Frontier) Bracket(i int) (lo, hi float64) {
	hi = math.Inf(1)
	held := f.held(i)
	for r, ok := range held {
		if !ok {
			hi = min(hi, r)
		}
	}
	for r, ok := range held {
		if ok && r < hi {
			lo = max(lo, r)
		}
	}
	return lo, hi
}

// held is, for each rate tried, whether one of its runs held bound i.
func (f *Frontier) held(i int) map[float64]bool {
	held := map[float64]bool{}
	for _, s := range f.Steps {
		held[s.Rate] = held[s.Rate] || s.Holds(f.Bounds[i])
	}
	return held
}

// fluke is a rate run once that broke a bound some higher rate held.
func (f *Frontier) fluke() (float64, bool) {
	runs := map[float64]int{}
	for _, s := range f.Steps {
		runs[s.Rate]++
	}
	for i := range f.Bounds {
		held := f.held(i)
		best := 0.0
		for r, ok := range held {
			if ok {
				best = max(best, r)
			}
		}
		worst := math.Inf(1) // the lowest such rate first: it decides the bracket
		for r, ok := range held {
			if !ok && r < best && runs[r] == 1 {
				worst = min(worst, r)
			}
		}
		if !math.IsInf(worst, 1) {
			return worst, true
		}
	}
	return 0, false
}

// Next is the rate of the next step, or false when the search is done:
// every bracket is within Precision, at Min or at Max, or MaxSteps ran.
func (f *Frontier) Next() (float64, bool) {
	if len(f.Steps) >= f.MaxSteps || len(f.Bounds) == 0 {
		return 0, false
	}
	if len(f.Steps) == 0 {
		return roundRate(min(max(f.Start, f.Min), f.Max)), true
	}
	if r, ok := f.fluke(); ok {
		return r, true
	}
	// ramp while the loosest bound holds everywhere
	if lo, hi := f.Bracket(len(f.Bounds) - 1); math.IsInf(hi, 1) && lo > 0 && lo < f.Max {
		if r := roundRate(min(lo*f.Factor, f.Max)); r > lo {
			return r, true
		}
	}
	for i := range f.Bounds {
		if r, ok := f.between(f.Bracket(i)); ok {
			return r, true
		}
	}
	return 0, false
}

// between is the next rate to try in a bracket, or false when it is done.
func (f *Frontier) between(lo, hi float64) (float64, bool) {
	switch {
	case math.IsInf(hi, 1):
		return 0, false // held up to the highest rate the ramp tried
	case lo == 0:
		// broken at every rate tried: go down, but not below Min
		if hi <= f.Min {
			return 0, false
		}
		r := roundRate(max(hi/f.Factor, f.Min))
		return r, r < hi
	case hi/lo <= 1+f.Precision:
		return 0, false
	}
	r := roundRate(math.Sqrt(lo * hi))
	return r, r > lo && r < hi
}

// roundRate keeps three significant digits, so the rates in a table read
// well (1414.2 is tried as 1410).
func roundRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(r))-2)
	return math.Round(r/p) * p
}
