package account

import (
	"container/list"
	"hash/maphash"
	"sync"
	"time"
)

// maxAttemptKeys bounds an attemptLimiter's memory: about 100 bytes a key,
// so some 6 MiB however many addresses and names unauthenticated callers
// try.
const maxAttemptKeys = 1 << 16

// attemptLimiter counts attempts per key in fixed windows: enough to make
// guessing passwords or redemption codes slow. It keeps a 64-bit hash of
// each key rather than the key, and at most max keys: when full, the key
// whose window began first is forgotten, which is the one closest to
// expiring anyway.
type attemptLimiter struct {
	limit  int
	window time.Duration
	max    int
	seed   maphash.Seed

	mu    sync.Mutex
	slots map[uint64]*list.Element // of *attemptSlot
	order list.List                // oldest window first
}

type attemptSlot struct {
	key   uint64
	start time.Time
	n     int
}

func newAttemptLimiter(limit int, window time.Duration, maxKeys int) *attemptLimiter {
	l := &attemptLimiter{limit: limit, window: window, max: maxKeys, seed: maphash.MakeSeed(),
		slots: make(map[uint64]*list.Element)}
	l.order.Init()
	return l
}

// slot returns key's live window, starting one when create is set (nil
// otherwise when there is none). The caller holds mu.
func (l *attemptLimiter) slot(now time.Time, key string, create bool) *attemptSlot {
	h := maphash.String(l.seed, key)
	if e, ok := l.slots[h]; ok {
		s := e.Value.(*attemptSlot)
		if now.Sub(s.start) < l.window {
			return s
		}
		if !create {
			return nil
		}
		s.start, s.n = now, 0
		l.order.MoveToBack(e)
		return s
	}
	if !create {
		return nil
	}
	// forget windows that have ended, then the oldest if still full
	for e := l.order.Front(); e != nil && (now.Sub(e.Value.(*attemptSlot).start) >= l.window || len(l.slots) >= l.max); e = l.order.Front() {
		delete(l.slots, e.Value.(*attemptSlot).key)
		l.order.Remove(e)
	}
	s := &attemptSlot{key: h, start: now}
	l.slots[h] = l.order.PushBack(s)
	return s
}

// allow counts an attempt for every key and reports whether all of them
// are within the limit; when not, how long until the fullest window ends.
// An attempt refused for one key still counts for the others, so a client
// cannot spread its guesses by alternating names.
func (l *attemptLimiter) allow(now time.Time, keys ...string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, wait := true, time.Duration(0)
	for _, k := range keys {
		s := l.slot(now, k, true)
		s.n++
		if s.n > l.limit {
			ok = false
			wait = max(wait, s.start.Add(l.window).Sub(now))
		}
	}
	return ok, wait
}

// count reports the attempts in key's current window and how long until
// it ends, keeping nothing.
func (l *attemptLimiter) count(now time.Time, key string) (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slot(now, key, false)
	if s == nil {
		return 0, 0
	}
	return s.n, s.start.Add(l.window).Sub(now)
}

// add counts an attempt for key without asking whether it is allowed: a
// failure learnt after the attempt was let through.
func (l *attemptLimiter) add(now time.Time, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slot(now, key, true).n++
}

// undo takes back an attempt allow counted for key, one that turned out
// not to be what the limit is about (a right password, a signup refused).
func (l *attemptLimiter) undo(now time.Time, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.slot(now, key, false); s != nil && s.n > 0 {
		s.n--
	}
}

// size is how many keys the limiter holds.
func (l *attemptLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots)
}
