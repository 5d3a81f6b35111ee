package billing

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Spending windows: a budget caps what a subject (a key, a user, a group of
// users, a user's plan) spends within a window of time. Every window that
// applies must have room for a request's reservation:
//
//	spent in the window + reserved by requests in flight + amount <= limit
//
// checked in memory (Spend), so admission costs no database round trip
// once a subject is known. Settled costs are added to the window of the
// settle time and recorded by the usage row (its window ids), whose batch
// commit adds them to the store's window_spend, so a restarted process, or
// another instance that first meets the subject, starts from what was
// committed. Like the ledger, a window can be overrun by at most what
// requests in flight cost beyond their reservations.

// WindowKind is one of the five windows a budget may set.
type WindowKind uint8

// The windows. Rolling5h is a rolling five hours in 5-minute buckets;
// Daily, Weekly (from Monday) and Monthly are calendar periods in the
// budgets' time zone; Lifetime never resets.
const (
	Rolling5h WindowKind = iota
	Daily
	Weekly
	Monthly
	Lifetime
	windowKinds
)

var windowNames = [windowKinds]string{"5h", "daily", "weekly", "monthly", "lifetime"}

func (k WindowKind) String() string { return windowNames[k] }

// ParseWindowKind reads a window's name; "window 5h" and "5h" are the same.
func ParseWindowKind(s string) (WindowKind, bool) {
	for i, n := range windowNames {
		if n == s {
			return WindowKind(i), true
		}
	}
	return 0, false
}

// WindowNames lists the windows, for messages.
func WindowNames() string { return strings.Join(windowNames[:], ", ") }

// WindowLimits are a budget's limits in units by window; 0 is no limit.
type WindowLimits [windowKinds]int64

// Any is true when some window has a limit.
func (w WindowLimits) Any() bool { return w != WindowLimits{} }

// Budget is the windows of one subject: "key:<id>", "user:<id>",
// "group:<name>" or "plan:<name>/user:<id>".
type Budget struct {
	Subject string
	Limits  WindowLimits
}

// bucket is the rolling window's step: spend frees 5h after the start of
// the 5-minute bucket it settled in.
const (
	bucket  = 5 * time.Minute
	rolling = 5 * time.Hour
)

// SpendLoader reads committed spend by window id (store.WindowSpend).
type SpendLoader func(ctx context.Context, ids []string) (map[string]int64, error)

// Spend holds every budgeted subject's spend by window period and what
// requests in flight reserve, for as long as the database is open (across
// reloads, like the ledger).
type Spend struct {
	// Load reads committed spend when a subject is first met; nil starts
	// from zero
	Load SpendLoader
	// Clock is the time settlements are counted at; nil is time.Now.
	// Tests share one fake clock between it and Admit's now.
	Clock func() time.Time
	// Idle is how long an unused subject is kept; default 1h
	Idle time.Duration
	// Refresh is how often a subject in use reads the store's committed
	// spend again, to see the other instances' (0: only when first met),
	// and gives back the claimed room it does not hold
	Refresh time.Duration
	// Claims, when set, makes the windows exact across instances: an
	// instance admits only within room it claimed from the store
	// (windows_claims.go); nil trusts this process's count alone
	Claims Claimer

	mu       sync.Mutex
	subjects map[string]*subjectSpend
	swept    time.Time
}

type subjectSpend struct {
	// spent by calendar period, and by 5-minute bucket in a ring (the
	// hot path sums it, so no map): what this process settled plus what
	// the store held when it was loaded
	spent    map[period]int64
	ring     [buckets]slot
	reserved [windowKinds]int64
	usedAt   time.Time
	readAt   time.Time // the last read of the store's spend
	// with claims: what this process claimed and settled, by calendar
	// period (by bucket in the ring), and when a claim of a window last
	// found no room
	claimed, mine map[period]int64
	outAt         [windowKinds]time.Time
	outNeed       [windowKinds]int64 // what that claim needed
	loc           *time.Location     // the zone its calendar periods were loaded in
}

func (s *Spend) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// period is one period of a window: for 5h the bucket's start in unix
// seconds, for daily and weekly the (Monday's) date as yyyymmdd, for
// monthly yyyymm, for lifetime 0. Integers, so the hot path formats no
// strings.
type period struct {
	kind WindowKind
	n    int64
}

func periodOf(k WindowKind, t time.Time, loc *time.Location) period {
	if k == Rolling5h {
		step := int64(bucket / time.Second)
		return period{k, t.Unix() / step * step}
	}
	if k == Lifetime {
		return period{k, 0}
	}
	t = t.In(loc)
	if k == Weekly {
		t = t.AddDate(0, 0, -((int(t.Weekday()) + 6) % 7)) // back to Monday
	}
	y, m, d := t.Date()
	if k == Monthly {
		return period{k, int64(y)*100 + int64(m)}
	}
	return period{k, int64(y)*10000 + int64(m)*100 + int64(d)}
}

// String is the period's id, as window ids carry it: "5h@<unix>",
// "daily@2026-11-26", "weekly@<Monday>", "monthly@2026-11", "lifetime".
func (p period) String() string { return string(p.appendID(nil)) }

// appendID appends the period's id to b without fmt, as every settled
// request does it for each of its windows.
func (p period) appendID(b []byte) []byte {
	b = append(append(b, p.kind.String()...), '@')
	pad := func(b []byte, v int64, w int) []byte {
		for d := int64(10); w > 1; d, w = d*10, w-1 {
			if v < d {
				b = append(b, '0')
			}
		}
		return strconv.AppendInt(b, v, 10)
	}
	switch p.kind {
	case Rolling5h:
		return strconv.AppendInt(b, p.n, 10)
	case Daily, Weekly:
		b = append(pad(b, p.n/10000, 4), '-')
		b = append(pad(b, p.n/100%100, 2), '-')
		return pad(b, p.n%100, 2)
	case Monthly:
		return pad(append(pad(b, p.n/100, 4), '-'), p.n%100, 2)
	}
	return b[:len(b)-1] // "lifetime", no period
}

// Period is the id of the period of window k that holds t, in loc.
func Period(k WindowKind, t time.Time, loc *time.Location) string {
	return periodOf(k, t, loc).String()
}

// periodEnd is when the calendar period of k holding t ends; zero for
// lifetime, and for the rolling window (it has no one end).
func periodEnd(k WindowKind, t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	switch k {
	case Daily:
		return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Weekly:
		wd := (int(t.Weekday()) + 6) % 7
		return time.Date(y, m, d-wd+7, 0, 0, 0, 0, loc)
	case Monthly:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Time{}
}

// buckets is how many 5-minute buckets the rolling window holds.
const buckets = int64(rolling / bucket)

// slot is one bucket of the ring: start (unix seconds) says which bucket
// it holds now, so a slot left from an older round reads as empty.
type slot struct {
	start, spent int64
	// with claims: what this process claimed and settled in the bucket
	claimed, mine int64
}

func ringIndex(start int64) int64 { return start / int64(bucket/time.Second) % buckets }

// bucketSpend is what the bucket starting at start holds.
func (ss *subjectSpend) bucketSpend(start int64) int64 {
	if sl := &ss.ring[ringIndex(start)]; sl.start == start {
		return sl.spent
	}
	return 0
}

// merge takes, period by period, the larger of what this process knows
// and what the store committed: the store's holds the other instances'
// spend, this process's view its own not yet committed. The view is then
// short of the truth by at most this process's uncommitted spend, when
// the others' exceed it.
func (ss *subjectSpend) merge(read *subjectSpend) {
	for p, v := range read.spent {
		ss.spent[p] = max(ss.spent[p], v)
	}
	for i, sl := range read.ring {
		switch cur := &ss.ring[i]; {
		case cur.start < sl.start:
			*cur = sl
		case cur.start == sl.start:
			cur.spent = max(cur.spent, sl.spent)
		}
	}
}

// add counts cost in the period p.
func (ss *subjectSpend) add(p period, cost int64) {
	if p.kind != Rolling5h {
		ss.spent[p] = AddSat(ss.spent[p], cost)
		return
	}
	sl := &ss.ring[ringIndex(p.n)]
	if sl.start != p.n {
		*sl = slot{start: p.n}
	}
	sl.spent = AddSat(sl.spent, cost)
}

// firstBucket is the oldest bucket the rolling window holds at t; the
// window is it and the buckets-1 after it.
func firstBucket(t time.Time) int64 {
	step := int64(bucket / time.Second)
	return t.Unix()/step*step - (buckets-1)*step
}

// currentPeriods are the periods a subject's windows read at t.
func currentPeriods(t time.Time, loc *time.Location) []period {
	ps := make([]period, 0, buckets+4)
	step := int64(bucket / time.Second)
	for i, b := int64(0), firstBucket(t); i < buckets; i, b = i+1, b+step {
		ps = append(ps, period{Rolling5h, b})
	}
	for k := Daily; k < windowKinds; k++ {
		ps = append(ps, periodOf(k, t, loc))
	}
	return ps
}

// used is what the subject's window k holds at t: settled spend in its
// period(s) and in-flight reservations.
func (ss *subjectSpend) used(k WindowKind, t time.Time, loc *time.Location) int64 {
	u := ss.reserved[k]
	if k == Rolling5h {
		step := int64(bucket / time.Second)
		for i, b := int64(0), firstBucket(t); i < buckets; i, b = i+1, b+step {
			u = AddSat(u, ss.bucketSpend(b))
		}
		return u
	}
	return AddSat(u, ss.spent[periodOf(k, t, loc)])
}

// prune drops calendar periods no window reads any more, so a subject's
// map stays at four of them.
func (ss *subjectSpend) prune(t time.Time, loc *time.Location) {
	if len(ss.spent) <= 4 {
		return
	}
	for p := range ss.spent {
		if p != periodOf(p.kind, t, loc) {
			delete(ss.spent, p)
		}
	}
}

// Hold reserves amount in every window of budgets, or refuses with the
// first window that has no room (a *WindowRefusal). A subject met for the
// first time is loaded from the store first (an error is the store's).
// A free request (amount 0) always fits.
func (s *Spend) Hold(ctx context.Context, now time.Time, loc *time.Location, budgets []Budget, amount int64) (*WindowHold, error) {
	if err := s.ensure(ctx, now, loc, budgets); err != nil {
		return nil, err
	}
	// with claims, a window whose claimed room is short is claimed more
	// of, outside the lock, and the hold tried again (another request may
	// take the new room meanwhile)
	for try := 0; ; try++ {
		h, short, err := s.tryHold(now, loc, budgets, amount, try == claimTries)
		if len(short) == 0 || err != nil {
			return h, err
		}
		if err := s.claim(ctx, now, loc, short, amount); err != nil {
			return nil, err
		}
	}
}

// tryHold is Hold in memory: it refuses, holds, or (with claims, unless
// last) says which windows need more claimed room.
func (s *Spend) tryHold(now time.Time, loc *time.Location, budgets []Budget, amount int64, last bool) (*WindowHold, []shortWindow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &WindowHold{sp: s, amount: amount, Remaining: -1}
	var short []shortWindow
	for _, b := range budgets {
		ss := s.subjects[b.Subject]
		for k := range windowKinds {
			lim := b.Limits[k]
			if lim == 0 {
				continue
			}
			used := ss.used(k, now, loc)
			if amount > 0 && AddSat(used, amount) > lim {
				return nil, nil, s.refusal(ss, b.Subject, k, lim, used, amount, now, loc)
			}
			if s.Claims != nil && amount > 0 {
				if room := ss.claimRoom(k, now, loc); room < amount {
					if last || ss.claimedOut(k, now, amount-room) {
						// the instances together have claimed the window
						return nil, nil, s.refusal(ss, b.Subject, k, lim, max(used, lim-room), amount, now, loc)
					}
					short = append(short, shortWindow{subject: b.Subject, kind: k, limit: lim, need: amount - room})
				}
			}
			room := lim - AddSat(used, amount)
			if h.Remaining < 0 || room < h.Remaining {
				h.Remaining, h.Reset = room, s.resetOf(ss, k, now, loc)
			}
		}
	}
	if len(short) > 0 {
		return nil, short, nil
	}
	for _, b := range budgets {
		ss := s.subjects[b.Subject]
		ss.usedAt = now
		for k := range windowKinds {
			if b.Limits[k] != 0 {
				ss.reserved[k] = AddSat(ss.reserved[k], amount)
			}
		}
		h.holds = append(h.holds, heldWindows{subject: b.Subject, limits: b.Limits, loc: loc})
	}
	return h, nil, nil
}

// resetOf is when window k next frees anything: a calendar period's end,
// the oldest rolling bucket with spend rolling out, never for lifetime.
func (s *Spend) resetOf(ss *subjectSpend, k WindowKind, now time.Time, loc *time.Location) time.Time {
	if k != Rolling5h {
		return periodEnd(k, now, loc)
	}
	step := int64(bucket / time.Second)
	for i, b := int64(0), firstBucket(now); i < buckets; i, b = i+1, b+step {
		if ss.bucketSpend(b) > 0 {
			return time.Unix(b, 0).Add(rolling)
		}
	}
	return now.Add(rolling)
}

// refusal words a full window: for the rolling one, Reset is when enough
// of the oldest spend rolls out to make room for amount (or, when what is
// in flight alone leaves none, a whole window from now).
func (s *Spend) refusal(ss *subjectSpend, subject string, k WindowKind, lim, used, amount int64, now time.Time, loc *time.Location) *WindowRefusal {
	r := &WindowRefusal{Subject: subject, Window: k, Limit: lim, Used: used, Amount: amount}
	switch k {
	case Lifetime:
		return r
	case Rolling5h:
		need := AddSat(used, amount) - lim
		r.Reset = now.Add(rolling)
		var freed int64
		step := int64(bucket / time.Second)
		for i, b := int64(0), firstBucket(now); i < buckets; i, b = i+1, b+step {
			freed = AddSat(freed, ss.bucketSpend(b))
			if freed >= need {
				r.Reset = time.Unix(b, 0).Add(rolling)
				break
			}
		}
	default:
		r.Reset = periodEnd(k, now, loc)
	}
	r.RetryAfter = max(r.Reset.Sub(now), time.Second)
	return r
}

// ensure loads the subjects of budgets not yet known, outside the lock.
func (s *Spend) ensure(ctx context.Context, now time.Time, loc *time.Location, budgets []Budget) error {
	s.mu.Lock()
	if s.subjects == nil {
		s.subjects = map[string]*subjectSpend{}
	}
	s.sweep(now)
	var missing []Budget
	for _, b := range budgets {
		ss, ok := s.subjects[b.Subject]
		if !ok || ss.loc != loc || s.Load != nil && s.Refresh > 0 && now.Sub(ss.readAt) >= s.Refresh {
			missing = append(missing, b)
			if ok {
				ss.readAt = now // one refresh at a time
			}
		}
	}
	s.mu.Unlock()
	var refreshed []string
	for _, b := range missing {
		fresh := &subjectSpend{spent: map[period]int64{}, usedAt: now, readAt: now, loc: loc}
		if s.Load != nil {
			ps := currentPeriods(now, loc)
			ids := make([]string, len(ps))
			for i, p := range ps {
				ids[i] = b.Subject + "/" + p.String()
			}
			got, err := s.Load(ctx, ids)
			if err != nil {
				s.mu.Lock()
				ss, known := s.subjects[b.Subject]
				s.mu.Unlock()
				if known && ss.loc == loc {
					continue // a refresh: what is known stands until the next
				}
				return fmt.Errorf("loading the spend of %s: %w", b.Subject, err)
			}
			for i, id := range ids {
				if v := got[id]; v != 0 {
					fresh.add(ps[i], v)
				}
			}
		}
		s.mu.Lock()
		if ss, ok := s.subjects[b.Subject]; !ok {
			s.subjects[b.Subject] = fresh
		} else if ss.loc != loc {
			// the time zone changed: calendar periods are read anew, what
			// is in flight stays reserved
			maps.Copy(ss.spent, fresh.spent)
			ss.loc = loc
		} else {
			ss.merge(fresh)
			refreshed = append(refreshed, b.Subject)
		}
		s.mu.Unlock()
	}
	if s.Claims != nil {
		for _, subject := range refreshed {
			s.giveBack(ctx, subject, now)
		}
	}
	return nil
}

// sweep forgets, at most once a minute, subjects idle for Idle with
// nothing in flight: memory stays bounded by the subjects in use, and one
// met again reads its spend from the store (its rows committed long
// since). Without a store there is nothing to read again: none is
// forgotten. Called with mu held.
func (s *Spend) sweep(now time.Time) {
	if s.Load == nil || now.Sub(s.swept) < time.Minute {
		return
	}
	s.swept = now
	idle := s.Idle
	if idle <= 0 {
		idle = time.Hour
	}
	for k, ss := range s.subjects {
		if ss.reserved == ([windowKinds]int64{}) && now.Sub(ss.usedAt) > idle {
			delete(s.subjects, k)
		}
	}
}

// Refund takes amount back out of each window id (as IDsAt gives them) a
// stored task's reservation was counted against, when the task settled
// for less. A period this process no longer holds (rolled out, or a
// subject forgotten and read again from the store, which the refund
// reached first) is left alone; with claims, the room freed is this
// process's to hold or give back.
func (s *Spend) Refund(ids string, amount int64) {
	if ids == "" || amount <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range strings.SplitSeq(ids, ",") {
		i := strings.LastIndexByte(id, '/')
		if i < 0 {
			continue
		}
		ss := s.subjects[id[:i]]
		p, ok := parsePeriod(id[i+1:])
		if ss == nil || !ok {
			continue
		}
		if p.kind == Rolling5h {
			sl := &ss.ring[ringIndex(p.n)]
			if sl.start != p.n {
				continue
			}
			sl.spent = max(sl.spent-amount, 0)
			if s.Claims != nil {
				sl.mine = max(sl.mine-amount, 0)
			}
			continue
		}
		if v, held := ss.spent[p]; held {
			ss.spent[p] = max(v-amount, 0)
		}
		if v, held := ss.mine[p]; held && s.Claims != nil {
			ss.mine[p] = max(v-amount, 0)
		}
	}
}

// parsePeriod reads a period's id (period.String).
func parsePeriod(id string) (period, bool) {
	if id == "lifetime" {
		return period{Lifetime, 0}, true
	}
	name, v, ok := strings.Cut(id, "@")
	k, known := ParseWindowKind(name)
	if !ok || !known || k == Lifetime {
		return period{}, false
	}
	if k == Rolling5h {
		n, err := strconv.ParseInt(v, 10, 64)
		return period{k, n}, err == nil
	}
	layout := "2006-01-02"
	if k == Monthly {
		layout = "2006-01"
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return period{}, false
	}
	return periodOf(k, t, time.UTC), true
}

// WindowStatus is one window of a subject as a user sees it.
type WindowStatus struct {
	Subject string    `json:"subject"`
	Window  string    `json:"window"`
	Limit   int64     `json:"limit"`
	Spent   int64     `json:"spent"`    // settled, in flight included
	Reset   time.Time `json:"reset_at"` // zero: never (lifetime)
}

// Status reports each window of budgets at now, loading subjects not yet
// known.
func (s *Spend) Status(ctx context.Context, now time.Time, loc *time.Location, budgets []Budget) ([]WindowStatus, error) {
	if err := s.ensure(ctx, now, loc, budgets); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []WindowStatus
	for _, b := range budgets {
		ss := s.subjects[b.Subject]
		for k := range windowKinds {
			if b.Limits[k] == 0 {
				continue
			}
			out = append(out, WindowStatus{Subject: b.Subject, Window: k.String(), Limit: b.Limits[k],
				Spent: ss.used(k, now, loc), Reset: s.resetOf(ss, k, now, loc)})
		}
	}
	return out, nil
}
