package caddymodule

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// RateLimitConfig is a number of attempts allowed per window.
type RateLimitConfig struct {
	Attempts int            `json:"attempts,omitempty"`
	Window   caddy.Duration `json:"window,omitempty"`
}

// attemptLimiter counts attempts per key in fixed windows: enough to make
// guessing passwords or redemption codes slow, with one map entry per key
// that tried recently.
type attemptLimiter struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	slots map[string]*attemptSlot
	swept time.Time
}

type attemptSlot struct {
	start time.Time
	n     int
}

func newAttemptLimiter(limit int, window time.Duration) *attemptLimiter {
	return &attemptLimiter{limit: limit, window: window, slots: map[string]*attemptSlot{}}
}

// allow counts an attempt for every key and reports whether all of them
// are within the limit; when not, how long until the fullest window ends.
// An attempt refused for one key still counts for the others, so a client
// cannot spread its guesses by alternating names.
func (l *attemptLimiter) allow(now time.Time, keys ...string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > l.window {
		for k, s := range l.slots {
			if now.Sub(s.start) >= l.window {
				delete(l.slots, k)
			}
		}
		l.swept = now
	}
	ok, wait := true, time.Duration(0)
	for _, k := range keys {
		s := l.slots[k]
		if s == nil || now.Sub(s.start) >= l.window {
			s = &attemptSlot{start: now}
			l.slots[k] = s
		}
		s.n++
		if s.n > l.limit {
			ok = false
			wait = max(wait, s.start.Add(l.window).Sub(now))
		}
	}
	return ok, wait
}
