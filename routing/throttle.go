package routing

import (
	"sync"
	"time"
)

// LogThrottle lets one report per key through per Interval and counts the
// ones it holds back, so a channel that fails every request during an
// outage is logged once an interval, with how often, instead of once per
// request. The zero value lets every report through.
type LogThrottle struct {
	Interval time.Duration

	mu   sync.Mutex
	keys map[string]*throttled
}

type throttled struct {
	last time.Time // when a report was last let through
	held int       // reports held back since
}

// Allow reports whether a report for key may be written at now and, if so,
// how many reports it stands for: itself and those held back since the
// last one let through.
func (t *LogThrottle) Allow(key string, now time.Time) (ok bool, count int) {
	if t.Interval <= 0 {
		return true, 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[key]
	if k == nil {
		if t.keys == nil {
			t.keys = make(map[string]*throttled)
		}
		k = &throttled{}
		t.keys[key] = k
	} else if now.Sub(k.last) < t.Interval {
		k.held++
		return false, 0
	}
	count = k.held + 1
	k.last, k.held = now, 0
	return true, count
}
