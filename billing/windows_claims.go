package billing

import (
	"context"
	"fmt"
	"time"
)

// Claims make a window exact across instances. Each instance admits in
// memory only within room it claimed of the window from the store
// (store.ClaimWindow: granted under the window's lock row while the
// claims of the window's periods stay within its limit), so that
//
//	sum over instances of what they settle in a window <= its limit
//
// up to what requests in flight cost beyond their reservations (settled
// beyond a claim, reported as claimed at the next refresh). A request that
// does not fit this instance's claimed room claims more, synchronously:
// the room it needs, up to four times its reservation (a quarter of the
// limit at most) so that the next requests need no store call. Every
// Refresh an instance gives back what it claimed and holds no request
// for, so the last of a window's room goes to whichever instance asks.
// A killed instance's unused claim is lost to the period: the window then
// admits less, never more.

// Claimer is the store's part of claims (store.BudgetStore).
type Claimer interface {
	ClaimWindow(ctx context.Context, lock string, ids []string, limit, want, least int64) (int64, error)
	ReturnWindow(ctx context.Context, id string, delta int64) error
}

// claimTries bounds the claims of one request.
const claimTries = 3

// shortWindow is a window whose claimed room does not cover a request.
type shortWindow struct {
	subject string
	kind    WindowKind
	limit   int64
	need    int64
}

// windowPeriods are the periods window k reads at t, the current last.
func windowPeriods(k WindowKind, t time.Time, loc *time.Location) []period {
	if k != Rolling5h {
		return []period{periodOf(k, t, loc)}
	}
	ps := make([]period, 0, buckets)
	step := int64(bucket / time.Second)
	for i, b := int64(0), firstBucket(t); i < buckets; i, b = i+1, b+step {
		ps = append(ps, period{Rolling5h, b})
	}
	return ps
}

// claimRoom is what this process may still hold in window k: claimed
// less settled here, over the window's periods, less what is in flight.
func (ss *subjectSpend) claimRoom(k WindowKind, t time.Time, loc *time.Location) int64 {
	var r int64
	for _, p := range windowPeriods(k, t, loc) {
		r = AddSat(r, subSat(ss.claimed[p], ss.mine[p]))
	}
	return subSat(r, ss.reserved[k])
}

// claimedOut is true while a claim of window k found no room lately: the
// requests after it are refused without asking the store again until the
// next refresh, when other instances have given back what they do not use.
func (ss *subjectSpend) claimedOut(k WindowKind, t time.Time, _ *time.Location) bool {
	return !ss.outAt[k].IsZero() && t.Sub(ss.outAt[k]) < time.Second
}

// claim asks the store for the room each short window needs.
func (s *Spend) claim(ctx context.Context, now time.Time, loc *time.Location, short []shortWindow, amount int64) error {
	for _, sw := range short {
		ps := windowPeriods(sw.kind, now, loc)
		ids := make([]string, len(ps))
		for i, p := range ps {
			ids[i] = sw.subject + "/" + p.String()
		}
		want := max(sw.need, min(MulSat(amount, 4), sw.limit/4))
		got, err := s.Claims.ClaimWindow(ctx, sw.subject+"/"+sw.kind.String(), ids, sw.limit, want, sw.need)
		if err != nil {
			return fmt.Errorf("claiming room in the %s window of %s: %w", sw.kind, sw.subject, err)
		}
		s.mu.Lock()
		if ss := s.subjects[sw.subject]; ss != nil {
			if got > 0 {
				cur := ps[len(ps)-1]
				ss.claimed = setIn(ss.claimed, cur, AddSat(ss.claimed[cur], got))
			} else {
				ss.outAt[sw.kind] = now
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// giveBack returns to the store, for each window of subject, the claimed
// room no request holds (or claims what was settled beyond the claims),
// and forgets periods out of every window. Local first: the room is gone
// here before it is free there.
func (s *Spend) giveBack(ctx context.Context, subject string, now time.Time) {
	type back struct {
		id    string
		delta int64
	}
	var backs []back
	s.mu.Lock()
	ss := s.subjects[subject]
	if ss == nil || len(ss.claimed) == 0 && len(ss.mine) == 0 {
		s.mu.Unlock()
		return
	}
	var kinds [windowKinds]bool
	for p := range ss.claimed {
		kinds[p.kind] = true
	}
	for k := range windowKinds {
		if !kinds[k] {
			continue
		}
		if unused := ss.claimRoom(k, now, ss.loc); unused != 0 {
			cur := periodOf(k, now, ss.loc)
			ss.claimed[cur] = subSat(ss.claimed[cur], unused)
			backs = append(backs, back{subject + "/" + cur.String(), -unused})
		}
	}
	inWindow := func(p period) bool {
		if p.kind == Rolling5h {
			return p.n >= firstBucket(now)
		}
		return p == periodOf(p.kind, now, ss.loc)
	}
	for _, m := range []map[period]int64{ss.claimed, ss.mine} {
		for p := range m {
			if !inWindow(p) {
				delete(m, p)
			}
		}
	}
	s.mu.Unlock()
	for _, b := range backs {
		// on failure the store keeps counting the room as claimed: the
		// window admits less until the period ends, never more
		_ = s.Claims.ReturnWindow(ctx, b.id, b.delta)
	}
}
