package billing

import (
	"context"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// Shared rate limits: several instances on one database enforce one key's
// and one user's rpm, tpm and max_parallel together, still admitting from
// memory. Every Sync each instance reports, for every key it serves, its
// claim on the key's requests a minute and requests at once, and the
// tokens it used in the last minute (store.ShareRates), and reads the
// others'. Its claim, and what it admits until the next sync, is its fair
// part of the limit, or what the others' claims leave when that is less,
// and never less than it already uses:
//
//	claim = max(own use, min(limit / instances, limit - others' claims))
//
// (the remainder of the division going to the instances whose names sort
// first), so that fair parts add up to the limit; what it admits is held
// to the smaller of the claim it reported and the same formula on the
// view it read back. An instance idle for a minute drops its claims. tpm is shared on use alone (tokens are known only once a
// request ends). An instance alone on a key has the whole limit, exactly
// as without sharing. A key's first request at an instance syncs it at
// once, claiming one request (one slot) more than it uses, which it may
// admit at once whatever the others claim; its share comes with its next
// sync, or at once, with a second call, when no other instance claims the
// key. An instance admits nothing beyond the claim it has written, and
// syncs a key once at a time (its concurrent first requests wait for one
// first sync), so that the claim the store holds last is the one it
// admits on.
//
// The slack: an instance that starts serving a key may admit one request
// (hold one slot) beyond the others' claims until their next sync; and
// instances that sync on views older than one another's last report can
// each take a share of the same rest, so in sum across instances a minute
// may admit more than rpm (or hold more than max_parallel at once) by what
// one Sync's staleness lets through, at most a share of the rest per
// instance and Sync. Requests leaving the window are seen at the next
// sync, which only makes the others stricter meanwhile.

// ShareConfig tunes rate sharing; zero fields take the defaults.
type ShareConfig struct {
	// Owner names this instance's reports; unique per process run.
	Owner string
	// Sync is how often reports are written and read. Default 1s.
	Sync time.Duration
	// Timeout bounds one store call. Default 5s.
	Timeout time.Duration
	// Log reports syncs the store refused; nil logs nothing.
	Log *zap.Logger
}

type sharing struct {
	st  store.Store
	cfg ShareConfig
	// idle is signalled, on the limiter's mu, when a sync lets go of its
	// keys (shared.syncing)
	idle *sync.Cond
}

// NewSharedLimiter returns a limiter that shares its keys' limits with the
// other instances reporting to st; RunSync keeps the reports current.
func NewSharedLimiter(st store.Store, cfg ShareConfig) *Limiter {
	if cfg.Owner == "" {
		cfg.Owner = NewLeaseOwner()
	}
	if cfg.Sync <= 0 {
		cfg.Sync = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	l := NewLimiter()
	l.sharing = &sharing{st: st, cfg: cfg, idle: sync.NewCond(&l.mu)}
	return l
}

// shared is a window's view of the other instances, as of its last sync.
type shared struct {
	synced   bool
	joining  bool            // synced once: the claim of one more is what it may admit
	syncing  bool            // a sync of the key is under way (Limiter.hold)
	reported bool            // a report of ours is live in the store
	others   store.RateShare // the other instances' claims (tokens: use)
	// own use at the sync: requests, tokens, parallel; and the claims
	// reported on requests and parallel
	requests, tokens, parallel int64
	claimR, claimP             int64
	lim                        store.Limits // the key's limits, as last asked
}

// share is this instance's claim on limit, own being its use and other
// the others' claims, on the view s holds: its fair part of the limit, or
// what the others leave when that is less, and never less than it uses.
// Alone, it is the whole limit.
func (s *shared) share(limit, own, other int64) int64 {
	n := int64(s.others.Owners)
	if !s.synced || n == 0 {
		return limit
	}
	fair := limit / (n + 1)
	if int64(s.others.Before) < limit%(n+1) {
		fair++
	}
	return max(own, min(fair, limit-other))
}

// allowed is what this instance may hold of limit: its share on the view
// read back, never more than the claim it reported (0: none, tpm).
//
// Never more than the claim, alone too: a claim is written before what it
// admits, and every store call reads the others' claims after writing its
// own under the key's lock (store.ShareRates), so whichever instance wrote
// last holds to what the others' claims leave, and the claims, hence what
// is admitted, add up to the limit.
func (s *shared) allowed(limit, own, other, claim int64) int64 {
	a := s.share(limit, own, other)
	if s.synced && claim > 0 {
		if s.joining && s.others.Owners > 0 {
			return claim // the others hold back for it from their next sync
		}
		a = min(a, claim)
	}
	return a
}

// requestsSince counts the starts in the rpm ring after since; the ring
// holds them oldest first from next.
func (w *window) requestsSince(since time.Time) int64 {
	n := len(w.starts)
	i := sort.Search(n, func(i int) bool { return w.starts[(w.next+i)%n].After(since) })
	return int64(n - i)
}

// use is w's report now: its claims on rpm and max_parallel (its use
// without such a limit), its tokens used.
func (w *window) use(now time.Time, k accountKey) store.RateUse {
	tokens, _ := w.tokensSince(now)
	sh := &w.shared
	u := store.RateUse{Token: k.token, ID: k.id, Requests: w.requestsSince(now.Add(-time.Minute)),
		Tokens: tokens, Parallel: w.parallel}
	if u.Requests == 0 && u.Tokens == 0 && u.Parallel == 0 && now.Sub(w.usedAt) >= time.Minute {
		return u // idle for a minute: its claims go back to the others
	}
	claim := func(limit, own, other int64) int64 {
		if !sh.synced {
			// no view yet: claim one more than is used, so that the
			// instances already serving the key hold back that much
			return min(own+1, limit)
		}
		return sh.share(limit, own, other)
	}
	if sh.lim.RPM > 0 {
		u.Requests = claim(sh.lim.RPM, u.Requests, sh.others.Requests)
	}
	if sh.lim.MaxParallel > 0 {
		u.Parallel = claim(sh.lim.MaxParallel, u.Parallel, sh.others.Parallel)
	}
	return u
}

// sync reports the use of keys and reads the others', and reports once
// more the keys whose claim the view read changes; first: only the keys
// not synced yet. Called without mu.
//
// One sync of a key runs at a time, the others wait for it: what an
// instance admits is held to the claim it reported last, which holds only
// if the claims reach the store in the order they are made and their
// views are taken in that order. Two syncs of a key at once (its
// concurrent first requests, each a first claim of one; a periodic sync
// beside them) could write their claims in the other order: a claim of one
// made before the claim of the whole limit, written after it, left the
// store holding one while this instance admitted up to the limit, and the
// others took the difference (CI: 15 admitted through three instances for
// an rpm of 12).
func (l *Limiter) sync(now time.Time, keys []accountKey, first bool) {
	ws, ks := l.hold(keys, first)
	if len(ks) == 0 {
		return
	}
	defer l.release(ws)
	l.report(now, ks, false)
}

// hold waits until no sync of keys is under way and takes them, all at
// once (so two syncs of overlapping keys never wait for each other); first
// leaves out the keys a sync waited for has synced. It returns the windows
// taken, and their keys.
func (l *Limiter) hold(keys []accountKey, first bool) ([]*window, []accountKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		busy := false
		for _, k := range keys {
			if w := l.keys[k]; w != nil && w.shared.syncing {
				busy = true
				break
			}
		}
		if !busy {
			break
		}
		l.sharing.idle.Wait()
	}
	ws := make([]*window, 0, len(keys))
	ks := keys[:0:0]
	for _, k := range keys {
		if w := l.keys[k]; w != nil && !(first && w.shared.synced) {
			w.shared.syncing = true
			ws, ks = append(ws, w), append(ks, k)
		}
	}
	return ws, ks
}

// release lets go of the windows hold took.
func (l *Limiter) release(ws []*window) {
	l.mu.Lock()
	for _, w := range ws {
		w.shared.syncing = false
	}
	l.mu.Unlock()
	l.sharing.idle.Broadcast()
}

// report is sync on keys it holds; again: the second report of a sync.
func (l *Limiter) report(now time.Time, keys []accountKey, again bool) {
	sh := l.sharing
	l.mu.Lock()
	uses := make([]store.RateUse, 0, len(keys))
	owns := make([][3]int64, 0, len(keys))
	ks := keys[:0:0]
	for _, k := range keys {
		if w := l.keys[k]; w != nil {
			uses = append(uses, w.use(now, k))
			tokens, _ := w.tokensSince(now)
			owns = append(owns, [3]int64{w.requestsSince(now.Add(-time.Minute)), tokens, w.parallel})
			ks = append(ks, k)
		}
	}
	l.mu.Unlock()
	if len(uses) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sh.cfg.Timeout)
	defer cancel()
	got, err := sh.st.ShareRates(ctx, sh.cfg.Owner, now.Add(3*sh.cfg.Sync), uses)
	l.mu.Lock()
	for i, k := range ks {
		w := l.keys[k]
		if w == nil {
			continue
		}
		w.shared.joining = !w.shared.synced
		w.shared.synced = true // on failure: the local limits alone, until the next sync
		if err != nil || len(got) != len(uses) {
			continue
		}
		u := uses[i]
		w.shared.others = got[i]
		w.shared.requests, w.shared.tokens, w.shared.parallel = owns[i][0], owns[i][1], owns[i][2]
		w.shared.claimR, w.shared.claimP = u.Requests, u.Parallel
		w.shared.reported = u != store.RateUse{Token: u.Token, ID: u.ID}
	}
	l.mu.Unlock()
	if err != nil {
		sh.cfg.Log.Warn("sharing rate limits: each instance enforces them alone until the store answers",
			zap.Int("keys", len(uses)), zap.Error(err))
		return
	}
	if again {
		return
	}
	// A claim is made on the view the last sync read, and the one just
	// read may give another: claim that now, rather than admit a sync
	// period on the old one (alone on a key, the whole limit at its first
	// request; a claim the others left room for, or took back, at once).
	// An instance joining keeps the one request it may take meanwhile.
	var changed []accountKey
	l.mu.Lock()
	for i, k := range ks {
		w := l.keys[k]
		if w == nil || w.shared.joining && w.shared.others.Owners > 0 {
			continue
		}
		if u := w.use(now, k); u.Requests != uses[i].Requests || u.Parallel != uses[i].Parallel {
			changed = append(changed, k)
		}
	}
	l.mu.Unlock()
	if len(changed) > 0 {
		l.report(now, changed, true)
	}
}

// syncFirst syncs, before admitting, the keys with limits this instance
// has not synced yet: a key's first request here.
func (l *Limiter) syncFirst(now time.Time, keys []accountKey, lims []store.Limits) {
	var fresh []accountKey
	l.mu.Lock()
	for i, k := range keys {
		w := l.keys[k]
		if w == nil {
			w = &window{usedAt: now}
			l.keys[k] = w
		}
		w.shared.lim = lims[i]
		if !w.shared.synced {
			fresh = append(fresh, k)
		}
	}
	l.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	l.sync(now, fresh, true)
}

// RunSync reports and reads the shared limits' use every Sync until ctx
// ends.
func (l *Limiter) RunSync(ctx context.Context) {
	sh := l.sharing
	if sh == nil {
		return
	}
	t := time.NewTicker(sh.cfg.Sync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.withdraw()
			return
		case now := <-t.C:
			var keys []accountKey
			l.mu.Lock()
			for k, w := range l.keys {
				if w.shared.reported || w.parallel > 0 || now.Sub(w.usedAt) < time.Minute {
					keys = append(keys, k)
				}
			}
			l.mu.Unlock()
			for start := 0; start < len(keys); start += renewBatch {
				l.sync(now, keys[start:min(start+renewBatch, len(keys))], false)
			}
		}
	}
}

// withdraw drops this instance's reports at shutdown (a use of all zeros
// deletes one), so that the others have the whole limits at their next
// sync rather than when the reports run out.
func (l *Limiter) withdraw() {
	sh := l.sharing
	now := time.Now()
	var uses []store.RateUse
	l.mu.Lock()
	for k, w := range l.keys {
		if w.shared.reported {
			u := w.use(now, k)
			uses = append(uses, store.RateUse{Token: u.Token, ID: u.ID})
		}
	}
	l.mu.Unlock()
	for start := 0; start < len(uses); start += renewBatch {
		ctx, cancel := context.WithTimeout(context.Background(), sh.cfg.Timeout)
		_, err := sh.st.ShareRates(ctx, sh.cfg.Owner, now, uses[start:min(start+renewBatch, len(uses))])
		cancel()
		if err != nil {
			sh.cfg.Log.Warn("dropping this instance's rate limit reports: the others wait for them to run out",
				zap.Int("keys", len(uses)-start), zap.Error(err))
			return
		}
	}
}
