package routing

import (
	"testing"
	"time"
)

func TestLogThrottle(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	th := &LogThrottle{Interval: time.Second}
	type step struct {
		key   string
		at    time.Duration
		ok    bool
		count int
	}
	for i, s := range []step{
		{"a", 0, true, 1},                       // the first report goes through
		{"a", 100 * time.Millisecond, false, 0}, // within the interval: held
		{"b", 200 * time.Millisecond, true, 1},  // another key has its own interval
		{"a", 999 * time.Millisecond, false, 0},
		{"a", time.Second, true, 3}, // itself and the two held back
		{"a", 1500 * time.Millisecond, false, 0},
		{"b", 5 * time.Second, true, 1},
		{"a", 10 * time.Second, true, 2}, // a late report still carries the held one
		{"a", 11 * time.Second, true, 1},
	} {
		ok, count := th.Allow(s.key, t0.Add(s.at))
		if ok != s.ok || count != s.count {
			t.Errorf("step %d (%s at %v): Allow = %v, %d; want %v, %d", i, s.key, s.at, ok, count, s.ok, s.count)
		}
	}

	var open LogThrottle // no interval: every report
	for range 3 {
		if ok, count := open.Allow("a", t0); !ok || count != 1 {
			t.Fatalf("a zero LogThrottle held a report back: %v, %d", ok, count)
		}
	}
}
