package load

import (
	"math"
	"testing"
	"time"
)

var testBounds = []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}

func newTestFrontier() *Frontier {
	return &Frontier{Bounds: testBounds, Start: 1000, Min: 100, Max: 100000, Factor: 2, Precision: 0.05, MaxSteps: 30}
}

// queueServer is a fake server: an M/M/1-like p99 of base/(1-rate/capacity),
// so the rate that holds bound b is capacity*(1-base/b).
func queueServer(base time.Duration, capacity float64) func(float64) FrontierStep {
	return func(rate float64) FrontierStep {
		s := FrontierStep{Rate: rate, Requests: 1000}
		if rate >= capacity {
			s.P99 = time.Second
		} else {
			s.P99 = time.Duration(float64(base) / (1 - rate/capacity))
		}
		return s
	}
}

// search runs f against server until it is done and returns the rates tried.
func search(t *testing.T, f *Frontier, server func(float64) FrontierStep) []float64 {
	t.Helper()
	var tried []float64
	for {
		r, ok := f.Next()
		if !ok {
			return tried
		}
		n := 0
		for _, x := range tried {
			if x == r {
				n++
			}
		}
		if n >= 2 {
			t.Fatalf("rate %v tried three times: %v", r, tried)
		}
		if r < f.Min || r > f.Max*1.01 {
			t.Fatalf("rate %v outside [%v, %v]", r, f.Min, f.Max)
		}
		tried = append(tried, r)
		f.Record(server(r))
	}
}

func TestFrontierFindsEachBound(t *testing.T) {
	const base, capacity = 400 * time.Microsecond, 6000.0
	f := newTestFrontier()
	tried := search(t, f, queueServer(base, capacity))
	t.Logf("%d steps: %v", len(tried), tried)
	if len(tried) > 20 {
		t.Errorf("%d steps: %v", len(tried), tried)
	}
	for i, b := range testBounds {
		want := capacity * (1 - float64(base)/float64(b))
		lo, hi := f.Bracket(i)
		if !(lo <= want && want < hi) {
			t.Errorf("bound %v: bracket [%v, %v) misses the true frontier %.0f", b, lo, hi, want)
		}
		if hi/lo > 1+f.Precision {
			t.Errorf("bound %v: bracket [%v, %v) wider than the precision", b, lo, hi)
		}
	}
}

// A step with a failed request holds no bound, whatever its p99: the
// frontier stops below the first rate that fails.
func TestFrontierFailuresDoNotHold(t *testing.T) {
	server := queueServer(400*time.Microsecond, 6000)
	f := newTestFrontier()
	search(t, f, func(rate float64) FrontierStep {
		s := server(rate)
		if rate > 2000 {
			s.Failed = 1
		}
		return s
	})
	for i, b := range testBounds {
		lo, hi := f.Bracket(i)
		if i == 0 {
			// 1 ms holds up to 3,600/s by latency, but the failures stop it at 2,000
			if lo > 2000 || hi/lo > 1+f.Precision {
				t.Errorf("bound %v: bracket [%v, %v), want within 5%% under 2000", b, lo, hi)
			}
			continue
		}
		if lo > 2000 || hi < 2000 {
			t.Errorf("bound %v: bracket [%v, %v) should stop at the failures (2000)", b, lo, hi)
		}
	}
}

// A fluke, a low rate breaking a bound that higher rates hold, is tried
// again; when it breaks the bound again, it makes the answer lower, never
// higher; the other bounds are found as before.
func TestFrontierFlukeIsConservative(t *testing.T) {
	const base, capacity = 400 * time.Microsecond, 6000.0
	server := queueServer(base, capacity)
	f := newTestFrontier()
	search(t, f, func(rate float64) FrontierStep {
		s := server(rate)
		if rate == 1000 { // the first step: breaks 1 ms, which 2,000/s holds
			s.P99 = 3 * time.Millisecond
		}
		return s
	})
	if lo, hi := f.Bracket(0); lo >= 1000 || hi != 1000 {
		t.Errorf("1 ms: bracket [%v, %v), want below the fluke at 1000", lo, hi)
	}
	for i := 1; i < len(testBounds); i++ {
		want := capacity * (1 - float64(base)/float64(testBounds[i]))
		if lo, hi := f.Bracket(i); !(lo <= want && want < hi) || hi/lo > 1+f.Precision {
			t.Errorf("bound %v: bracket [%v, %v), want within 5%% under %.0f", testBounds[i], lo, hi, want)
		}
	}
}

// A fluke that does not come again, as one stall in a short run, does not
// decide the answer: its rate is tried again and the frontier found.
func TestFrontierFlukeTriedAgain(t *testing.T) {
	const base, capacity = 400 * time.Microsecond, 6000.0
	server := queueServer(base, capacity)
	f := newTestFrontier()
	stalled := false
	search(t, f, func(rate float64) FrontierStep {
		s := server(rate)
		// the first rate between 2,000/s and 4,000/s, which both held 5
		// and 10 ms, stalls once
		if rate > 2000 && rate < 4000 && !stalled {
			s.P99, stalled = 30*time.Millisecond, true
		}
		return s
	})
	if !stalled {
		t.Fatal("the search never ran between 2,000 and 4,000/s")
	}
	for i, b := range testBounds {
		want := capacity * (1 - float64(base)/float64(b))
		if lo, hi := f.Bracket(i); !(lo <= want && want < hi) || hi/lo > 1+f.Precision {
			t.Errorf("bound %v: bracket [%v, %v), want within 5%% under %.0f", b, lo, hi, want)
		}
	}
}

func TestFrontierBelowMinAndAtMax(t *testing.T) {
	// nothing holds 1 ms; 10 ms holds at every rate up to Max
	f := newTestFrontier()
	f.Max = 20000
	tried := search(t, f, func(rate float64) FrontierStep {
		return FrontierStep{Rate: rate, Requests: 500, P99: 2 * time.Millisecond}
	})
	if lo, hi := f.Bracket(0); lo != 0 || hi != f.Min {
		t.Errorf("1 ms: bracket [%v, %v), want [0, Min]: tried %v", lo, hi, tried)
	}
	if lo, hi := f.Bracket(2); lo != f.Max || !math.IsInf(hi, 1) {
		t.Errorf("10 ms: bracket [%v, %v), want [Max, +Inf): tried %v", lo, hi, tried)
	}
}

// The step limit ends the search with honest brackets: lo held, hi broke.
func TestFrontierMaxSteps(t *testing.T) {
	server := queueServer(400*time.Microsecond, 6000)
	f := newTestFrontier()
	f.MaxSteps = 6
	tried := search(t, f, server)
	if len(tried) != 6 {
		t.Fatalf("%d steps, want 6: %v", len(tried), tried)
	}
	for i, b := range testBounds {
		lo, hi := f.Bracket(i)
		if lo > 0 && !server(lo).Holds(b) || !math.IsInf(hi, 1) && server(hi).Holds(b) {
			t.Errorf("bound %v: bracket [%v, %v) is not what was measured", b, lo, hi)
		}
	}
}

func TestFrontierEmptyStep(t *testing.T) {
	if (FrontierStep{Rate: 100}).Holds(time.Second) {
		t.Error("a step without requests holds a bound")
	}
}

func TestRoundRate(t *testing.T) {
	for in, want := range map[float64]float64{1414.2: 1410, 707.1: 707, 14142: 14100, 99.96: 100, 0: 0} {
		if got := roundRate(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("roundRate(%v) = %v, want %v", in, got, want)
		}
	}
}
