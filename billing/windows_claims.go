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

// bump adds to what this process claimed and settled in period p.
func (ss *subjectSpend) bump(p period, claimed, mine int64) {
	if p.kind == Rolling5h {
		sl := &ss.ring[ringIndex(p.n)]
		if sl.start != p.n {
			*sl = slot{start: p.n}
		}
		sl.claimed, sl.mine = AddSat(sl.claimed, claimed), AddSat(sl.mine, mine)
		return
	}
	if claimed != 0 {
		ss.claimed = setIn(ss.claimed, p, AddSat(ss.claimed[p], claimed))
	}
	if mine != 0 {
		ss.mine = setIn(ss.mine, p, AddSat(ss.mine[p], mine))
	}
}

// claimRoom is what this process may still hold in window k: claimed
// less settled here, over the window's periods, less what is in flight.
func (ss *subjectSpend) claimRoom(k WindowKind, t time.Time, loc *time.Location) int64 {
	var r int64
	if k != Rolling5h {
		p := periodOf(k, t, loc)
		r = subSat(ss.claimed[p], ss.mine[p])
	} else {
		step := int64(bucket / time.Second)
		for i, b := int64(0), firstBucket(t); i < buckets; i, b = i+1, b+step {
			if sl := &ss.ring[ringIndex(b)]; sl.start == b {
				r = AddSat(r, subSat(sl.claimed, sl.mine))
			}
		}
	}
	return subSat(r, ss.reserved[k])
}

// claims says which windows this process holds claims or spend in.
func (ss *subjectSpend) claims(t time.Time) (kinds [windowKinds]bool) {
	for p := range ss.claimed {
		kinds[p.kind] = true
	}
	for p := range ss.mine {
		kinds[p.kind] = true
	}
	step := int64(bucket / time.Second)
	for i, b := int64(0), firstBucket(t); i < buckets; i, b = i+1, b+step {
		if sl := &ss.ring[ringIndex(b)]; sl.start == b && (sl.claimed != 0 || sl.mine != 0) {
			kinds[Rolling5h] = true
		}
	}
	return kinds
}

// claimedOut is true while a claim of window k found no room for need or
// less within the last second: the requests needing as much are refused
// without asking the store again meanwhile.
func (ss *subjectSpend) claimedOut(k WindowKind, t time.Time, need int64) bool {
	return !ss.outAt[k].IsZero() && t.Sub(ss.outAt[k]) < time.Second && need >= ss.outNeed[k]
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
				ss.bump(ps[len(ps)-1], got, 0)
			} else {
				ss.outAt[sw.kind], ss.outNeed[sw.kind] = now, sw.need
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
	if ss == nil {
		s.mu.Unlock()
		return
	}
	kinds := ss.claims(now)
	for k := range windowKinds {
		switch {
		case !kinds[k]:
		case k == Rolling5h:
			// bucket by bucket, so that what comes back rolls out of the
			// window when the claim it comes from does; what is in flight
			// keeps the newest claims
			left := ss.reserved[k]
			step := int64(bucket / time.Second)
			for b := firstBucket(now) + (buckets-1)*step; b >= firstBucket(now); b -= step {
				sl := &ss.ring[ringIndex(b)]
				if sl.start != b {
					continue
				}
				avail := subSat(sl.claimed, sl.mine)
				keep := min(max(avail, 0), left)
				left -= keep
				if delta := keep - avail; delta != 0 { // negative: unused back; positive: spent beyond
					sl.claimed = AddSat(sl.claimed, delta)
					backs = append(backs, back{subject + "/" + period{Rolling5h, b}.String(), delta})
				}
			}
		default:
			if unused := ss.claimRoom(k, now, ss.loc); unused != 0 {
				cur := periodOf(k, now, ss.loc)
				ss.bump(cur, -unused, 0)
				backs = append(backs, back{subject + "/" + cur.String(), -unused})
			}
		}
	}
	for _, m := range []map[period]int64{ss.claimed, ss.mine} {
		for p := range m {
			if p != periodOf(p.kind, now, ss.loc) {
				delete(m, p) // a calendar period that ended
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
