package billing

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// SetLimit sets one of the gateway-wide default limits of every key (a
// Caddyfile `limits` line): rpm, tpm or max_parallel, a whole number, 0
// for no limit.
func SetLimit(l *store.Limits, opt, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("limits: %s must be a whole number, 0 for no limit, not %q", opt, v)
	}
	switch opt {
	case "rpm":
		l.RPM = n
	case "tpm":
		l.TPM = n
	case "max_parallel":
		l.MaxParallel = n
	default:
		return fmt.Errorf("limits: unrecognized option %q (rpm, tpm, max_parallel)", opt)
	}
	return nil
}

// Limiter enforces rate limits per token and per user, over a sliding
// minute, exactly: for every key, at every instant t,
//
//	requests admitted in (t-1m, t] <= rpm
//	requests admitted and not yet Done <= max_parallel
//	tokens used in (t-1m, t] < tpm + what the last request admitted used
//
// Tokens are known only once a request ends, so tpm admits a request while
// the minute's tokens are below the limit and counts what it used at Done.
// One mutex covers every key: a request checks and takes its token's and its
// user's limits in one step, so concurrent requests cannot slip past one.
//
// A limiter made by NewSharedLimiter holds these in sum with the other
// instances on its database, within the slack ratesharing.go states.
type Limiter struct {
	mu      sync.Mutex
	keys    map[accountKey]*window
	sharing *sharing // nil: this instance alone
}

// window is one key's recent history.
type window struct {
	parallel int64
	// starts of the last rpm admissions, a ring: next is the oldest
	starts []time.Time
	next   int
	// tokens per second over the last minute, a ring indexed by unix second
	tokens   [60]int64
	tokenSec [60]int64
	usedAt   time.Time
	shared   shared // the other instances' use, when limits are shared
}

// NewLimiter returns an empty limiter.
func NewLimiter() *Limiter {
	return &Limiter{keys: map[accountKey]*window{}}
}

// Ticket is an admitted request's hold on its limits; Done ends it.
type Ticket struct {
	l               *Limiter
	tokenID, userID int64
	parallel        [2]bool // whether the token's, the user's count was raised
}

// Refusal says which limit refused a request and when to try again.
type Refusal struct {
	Limit      string // "rpm", "tpm" or "max_parallel"
	Of         string // "key" or "user"
	Value      int64
	RetryAfter time.Duration
}

// Admit checks the token's and the user's limits (a zero field is no
// limit) and, if every one has room, takes them all.
func (l *Limiter) Admit(now time.Time, tokenID int64, tl store.Limits, userID int64, ul store.Limits) (Ticket, *Refusal) {
	type side struct {
		k   accountKey
		lim store.Limits
		of  string
	}
	sides := [2]side{{accountKey{true, tokenID}, tl, "key"}, {accountKey{false, userID}, ul, "user"}}
	if l.sharing != nil {
		var keys []accountKey
		var lims []store.Limits
		for _, s := range sides {
			if s.lim != (store.Limits{}) {
				keys, lims = append(keys, s.k), append(lims, s.lim)
			}
		}
		l.syncFirst(now, keys, lims)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var ws [2]*window
	for i, s := range sides {
		if s.lim == (store.Limits{}) {
			continue
		}
		w := l.keys[s.k]
		if w == nil {
			w = &window{}
			l.keys[s.k] = w
		}
		ws[i] = w
		if r := w.check(now, s.lim); r != nil {
			r.Of = s.of
			return Ticket{}, r
		}
	}
	t := Ticket{l: l, tokenID: tokenID, userID: userID}
	for i, w := range ws {
		if w == nil {
			continue
		}
		lim := sides[i].lim
		w.usedAt = now
		if lim.MaxParallel > 0 {
			w.parallel++
			t.parallel[i] = true
		}
		if lim.RPM > 0 {
			w.take(now, lim.RPM)
		}
	}
	return t, nil
}

// Check is Admit without the taking: the first of the token's and the
// user's limits with no room now, or nil. It makes nothing and syncs
// nothing (a key it has not seen has room), so it is a cheap look before
// a request's body is read; Admit still decides.
func (l *Limiter) Check(now time.Time, tokenID int64, tl store.Limits, userID int64, ul store.Limits) *Refusal {
	if tl == (store.Limits{}) && ul == (store.Limits{}) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range [2]struct {
		k   accountKey
		lim store.Limits
		of  string
	}{{accountKey{true, tokenID}, tl, "key"}, {accountKey{false, userID}, ul, "user"}} {
		if w := l.keys[s.k]; w != nil && s.lim != (store.Limits{}) {
			if r := w.check(now, s.lim); r != nil {
				r.Of = s.of
				return r
			}
		}
	}
	return nil
}

// check reports the first limit w has no room under.
func (w *window) check(now time.Time, lim store.Limits) *Refusal {
	sh := &w.shared
	if lim.MaxParallel > 0 && w.parallel >= sh.allowed(lim.MaxParallel, sh.parallel, sh.others.Parallel, sh.claimP) {
		// no time tells when one ends; a second is a fair guess
		return &Refusal{Limit: "max_parallel", Value: lim.MaxParallel, RetryAfter: time.Second}
	}
	if lim.RPM > 0 && int64(len(w.starts)) >= lim.RPM {
		oldest := w.starts[w.next%len(w.starts)]
		if free := oldest.Add(time.Minute); free.After(now) {
			return &Refusal{Limit: "rpm", Value: lim.RPM, RetryAfter: free.Sub(now)}
		}
	}
	if lim.RPM > 0 && sh.synced && (sh.others.Owners > 0 || sh.claimR > 0) &&
		w.requestsSince(now.Add(-time.Minute)) >= sh.allowed(lim.RPM, sh.requests, sh.others.Requests, sh.claimR) {
		// this instance's share is taken: the others' next sync may free some
		return &Refusal{Limit: "rpm", Value: lim.RPM, RetryAfter: time.Second}
	}
	if lim.TPM > 0 {
		used, oldest := w.tokensSince(now)
		if used >= sh.allowed(lim.TPM, sh.tokens, sh.others.Tokens, 0) {
			wait := time.Second
			if oldest > 0 {
				wait = time.Unix(oldest+60, 0).Sub(now)
			}
			return &Refusal{Limit: "tpm", Value: lim.TPM, RetryAfter: max(wait, time.Second)}
		}
	}
	return nil
}

// take records an admission in the rpm ring, which holds the last rpm
// starts (resized if the limit changed).
func (w *window) take(now time.Time, rpm int64) {
	if int64(len(w.starts)) != rpm {
		// keep the newest starts, in order, in a ring of the new size
		old := make([]time.Time, 0, len(w.starts))
		for i := range w.starts {
			old = append(old, w.starts[(w.next+i)%len(w.starts)])
		}
		if int64(len(old)) > rpm {
			old = old[int64(len(old))-rpm:]
		}
		w.starts, w.next = old, 0
		if int64(len(w.starts)) < rpm {
			w.starts = append(w.starts, now)
			return
		}
	}
	w.starts[w.next] = now
	w.next = (w.next + 1) % len(w.starts)
}

// tokensSince sums the tokens of the last minute and names its oldest
// second with any.
func (w *window) tokensSince(now time.Time) (sum, oldest int64) {
	sec := now.Unix()
	for i := range w.tokens {
		if s := w.tokenSec[i]; s > sec-60 && w.tokens[i] > 0 {
			sum = AddSat(sum, w.tokens[i])
			if oldest == 0 || s < oldest {
				oldest = s
			}
		}
	}
	return sum, oldest
}

// Done ends the ticket's hold on max_parallel and counts the tokens the
// request used against tpm.
func (t Ticket) Done(now time.Time, tokens int64) { t.count(now, tokens, true) }

// Used counts tokens against tpm while the ticket stays held: a Realtime
// session's responses, each counted as it ends rather than all at the
// session's end.
func (t Ticket) Used(now time.Time, tokens int64) { t.count(now, tokens, false) }

func (t Ticket) count(now time.Time, tokens int64, done bool) {
	if t.l == nil {
		return
	}
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	for i, k := range [2]accountKey{{true, t.tokenID}, {false, t.userID}} {
		w := t.l.keys[k]
		if w == nil {
			continue
		}
		if done && t.parallel[i] {
			w.parallel--
		}
		if tokens > 0 {
			sec := now.Unix()
			j := sec % 60
			if w.tokenSec[j] != sec {
				w.tokenSec[j], w.tokens[j] = sec, 0
			}
			w.tokens[j] = AddSat(w.tokens[j], tokens)
		}
		w.usedAt = now
	}
}

// Sweep forgets keys with nothing in flight and no use in the last minute.
func (l *Limiter) Sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, w := range l.keys {
		if w.parallel == 0 && now.Sub(w.usedAt) > time.Minute {
			delete(l.keys, k)
		}
	}
}

// Effective is a key's limits: each of its own fields if set, else the
// gateway's default.
func Effective(own, def store.Limits) store.Limits {
	pick := func(a, b int64) int64 {
		if a > 0 {
			return a
		}
		return max(b, 0)
	}
	return store.Limits{RPM: pick(own.RPM, def.RPM), TPM: pick(own.TPM, def.TPM), MaxParallel: pick(own.MaxParallel, def.MaxParallel)}
}
