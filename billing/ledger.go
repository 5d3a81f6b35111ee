package billing

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Ledger holds every active user's and token's spendable quota in memory so
// that admitting a request costs no database round trip. For each account it
// knows the remaining quota as the store last said, the settled costs not yet
// committed to the store, and the reservations of requests in flight:
//
//	available = remaining - unflushed - reserved
//
// A request is admitted only if its reservation fits in what is available,
// so a balance can go below zero by at most what in-flight requests cost
// beyond their reservations.
//
// A ledger made by NewLeasedLedger takes remaining from leases rather than
// from the store's balance (lease.go), so that several instances on one
// database hold the same guarantee together. One made by NewLedger trusts
// the balance it is given: one process per database.
type Ledger struct {
	mu       sync.Mutex
	accounts map[accountKey]*account
	leases   *leasing // nil: remaining is the store's balance
	// storeMu keeps lease calls and batch commits apart, so that a lease
	// is granted on a balance read before or after a commit whose costs
	// the ledger counts accordingly, never while one is under way.
	storeMu sync.Mutex
}

type accountKey struct {
	token bool // false: a user's balance; true: a token's own limit
	id    int64
}

type account struct {
	remaining int64 // as of the last sync with the store
	unflushed int64 // settled here, not yet committed
	reserved  int64 // held by requests in flight
	// commits counts batches committed since the account was loaded, so a
	// sync that read the store before a commit can tell it is stale.
	commits  uint64
	syncedAt time.Time
	usedAt   time.Time
	limited  bool // tokens only: false when the token has no limit of its own
	// loaded is false for an account known only by what it owes (rows
	// journaled by an earlier run) until the store's balance is read.
	loaded bool
	// moved sums what changed remaining besides lease grants (commits,
	// debits), so a grant applies what moved during its store call.
	moved int64

	// With leases: remaining is the lease less what was committed since.
	leased   bool      // the store holds a lease of this instance's
	expires  time.Time // nothing is admitted against the lease from then on
	leasedAt time.Time // the last grant
	free     int64     // the balance no lease held at leasedAt
	stale    bool      // credited since leasedAt: a top-up may find more
	credits  uint64    // credits heard: a grant read before one leaves stale
	low      bool      // under half its target: top up in the background
	// what sizes the lease: costs settled since the last renewal, their
	// rate (units a second), the largest reservations of this renewal
	// period and of the one before
	settled        int64
	rate           float64
	ask, askBefore int64
	boost          int64 // a target doubled by a burst, halved every renewal
	// waiting is what requests waiting for a synchronous top-up ask, so
	// that the first top-up of a burst has room for the whole burst
	waiting int64
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{accounts: map[accountKey]*account{}}
}

// Hold is a reservation; Settle or Release ends it.
type Hold struct {
	UserID, TokenID int64
	Amount          int64
	// Windows is the reservation in the spending windows that apply
	// (windows.go), ended with the ledger's hold; nil for none
	Windows *WindowHold
}

// Admit registers the user's and token's balances as the store reported
// them (when the ledger does not know the account yet) and reserves amount
// against both. It returns false, reserving nothing, if either account has
// less than amount available, or nothing at all when amount is zero.
func (l *Ledger) Admit(u *store.User, t *store.Token, amount int64) (Hold, bool) {
	h := Hold{UserID: u.ID, TokenID: t.ID, Amount: amount}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ua := l.load(accountKey{false, u.ID}, u.Quota, true)
	ta := l.load(accountKey{true, t.ID}, t.QuotaLimit-t.UsedQuota, t.QuotaLimit > 0)
	if l.leases != nil {
		ua.ask, ta.ask = max(ua.ask, amount), max(ta.ask, amount)
	}
	if !ua.fits(amount, now) || (ta.limited && !ta.fits(amount, now)) {
		return Hold{}, false
	}
	ua.reserved = AddSat(ua.reserved, amount)
	ta.reserved = AddSat(ta.reserved, amount)
	ua.usedAt, ta.usedAt = now, now
	if l.leases != nil && (l.runningLow(ua) || ta.limited && l.runningLow(ta)) {
		select {
		case l.leases.kick <- struct{}{}:
		default: // a top-up is on its way
		}
	}
	return h, true
}

// runningLow marks an account whose slice is under half its target, for
// the background top-up. Called with mu held.
func (l *Ledger) runningLow(a *account) bool {
	cfg := &l.leases.cfg
	t := cfg.target(a)
	if a.low || a.available() >= t/2 {
		return false
	}
	if time.Since(a.leasedAt) < cfg.Renew {
		// spent faster than renewals come: a burst the rate has not seen
		a.boost = min(MulSat(t, 2), cfg.Max)
	}
	a.low = true
	return true
}

// topUpTries bounds the synchronous top-ups of one request.
const topUpTries = 4

// Hold is Admit for a gateway: with leases, a request that does not fit
// this instance's slices but might fit the balances has them topped up
// synchronously (once, unless other requests take the room meanwhile). The error is a *QuotaRefusal when the balance does
// not cover amount, a *LeaseUnavailable when the store could not say.
func (l *Ledger) Hold(u *store.User, t *store.Token, amount int64) (Hold, error) {
	h, ok := l.Admit(u, t, amount)
	// Requests that miss together top up one after another, and one's
	// room may go to another between its top-up and its admission: it
	// tries again while the balance might still cover it, a few times.
	for try := 0; !ok && l.leases != nil && try < topUpTries && l.worthTopUp(u, t, amount); try++ {
		l.waiting(u, t, amount)
		err := l.topUp(u, t, amount)
		l.waiting(u, t, -amount)
		if err != nil {
			return Hold{}, &LeaseUnavailable{Err: err}
		}
		h, ok = l.Admit(u, t, amount)
	}
	if !ok {
		avail, _ := l.Available(u.ID)
		return Hold{}, &QuotaRefusal{Amount: amount, Available: avail}
	}
	return h, nil
}

func (l *Ledger) load(k accountKey, remaining int64, limited bool) *account {
	a, ok := l.accounts[k]
	if !ok {
		a = &account{}
		l.accounts[k] = a
	}
	if l.leases != nil {
		// a lease, not the balance read, is what may be spent here; the
		// token's limit is the key cache's, as fresh as the token itself
		a.limited, a.loaded = limited, true
		return a
	}
	if !a.loaded {
		a.remaining, a.limited, a.syncedAt, a.loaded = remaining, limited, time.Now(), true
	}
	return a
}

// Owe counts a cost recorded but not yet in the store (a journaled row
// from an earlier run) as unflushed, before the account is even loaded.
func (l *Ledger) Owe(userID, tokenID, cost int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []accountKey{{false, userID}, {true, tokenID}} {
		a, ok := l.accounts[k]
		if !ok {
			a = &account{usedAt: time.Now()}
			l.accounts[k] = a
		}
		a.unflushed = AddSat(a.unflushed, cost)
	}
}

// available is remaining - unflushed - reserved, saturating instead of
// wrapping, so no absurd balance admits a request.
func (a *account) available() int64 {
	return subSat(subSat(a.remaining, a.unflushed), a.reserved)
}

// fits is true when amount can be held. A request that costs nothing (a
// free model) always fits, even on an empty balance; nothing else fits a
// lease past its time.
func (a *account) fits(amount int64, now time.Time) bool {
	return amount == 0 || a.available() >= amount && (a.expires.IsZero() || now.Before(a.expires))
}

// AddSat and subSat are checked int64 arithmetic that saturates.
func AddSat(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

func subSat(a, b int64) int64 {
	if b == math.MinInt64 {
		return AddSat(AddSat(a, math.MaxInt64), 1)
	}
	return AddSat(a, -b)
}

// Room is what the user and token may still hold, loading them as Admit
// does: the smaller of the two when the token has a limit of its own.
//
// With leases it is the slice's room and the balance no lease holds,
// as a store call learns them when the ledger's are not fresh.
func (l *Ledger) Room(u *store.User, t *store.Token) int64 {
	if l.leases != nil {
		l.mu.Lock()
		stale := false
		now := time.Now()
		for _, k := range l.sides(u, t) {
			a := l.load(k, 0, true)
			stale = stale || !l.fresh(a, now)
		}
		l.mu.Unlock()
		if stale {
			_ = l.topUp(u, t, 0) // on failure the room known is all there is
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	room := l.load(accountKey{false, u.ID}, u.Quota, true).spendable(l.leases != nil)
	if ta := l.load(accountKey{true, t.ID}, t.QuotaLimit-t.UsedQuota, t.QuotaLimit > 0); ta.limited {
		room = min(room, ta.spendable(l.leases != nil))
	}
	return room
}

// spendable is what an account may still spend: its room here and, with
// leases, the free balance it could lease.
func (a *account) spendable(leased bool) int64 {
	if !leased {
		return a.available()
	}
	return AddSat(a.available(), max(a.free, 0))
}

// Available reports what a user may still spend, for errors and display.
func (l *Ledger) Available(userID int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accounts[accountKey{false, userID}]
	if !ok {
		return 0, false
	}
	return a.spendable(l.leases != nil), true
}

// Reserved is the quota held by requests in flight, over every user.
func (l *Ledger) Reserved() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	for k, a := range l.accounts {
		if !k.token {
			sum += a.reserved
		}
	}
	return sum
}

// Settle ends a hold with the real cost, which now counts as unflushed until
// the writer commits it.
func (l *Ledger) Settle(h Hold, cost int64) {
	h.Windows.settle(cost)
	if h.Windows.PlanPaid() {
		cost = 0 // the plan pays: the usage row charges no balance either
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []accountKey{{false, h.UserID}, {true, h.TokenID}} {
		if a, ok := l.accounts[k]; ok {
			a.reserved = subSat(a.reserved, h.Amount)
			a.unflushed = AddSat(a.unflushed, cost)
			a.settled = AddSat(a.settled, cost)
		}
	}
}

// Committed tells the ledger that costs were written to the store: the
// store's remaining balance already reflects them.
func (l *Ledger) Committed(userCosts, tokenCosts map[int64]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	apply := func(token bool, costs map[int64]int64) {
		for id, c := range costs {
			if a, ok := l.accounts[accountKey{token, id}]; ok {
				a.unflushed = subSat(a.unflushed, c)
				a.remaining = subSat(a.remaining, c)
				a.moved = subSat(a.moved, c)
				a.commits++
			}
		}
	}
	apply(false, userCosts)
	apply(true, tokenCosts)
}

// Credit adds to a user's known balance after the store was credited (top
// up, redemption) by this process. With leases a credit is the balance's,
// not the lease's: the next request that does not fit leases it. A debit
// (amount < 0) comes off the lease at once, as it would off the balance;
// the next renewal sizes the lease to the balance again.
func (l *Ledger) Credit(userID, amount int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accounts[accountKey{false, userID}]
	switch {
	case !ok:
	case l.leases == nil:
		a.remaining = AddSat(a.remaining, amount)
	case amount < 0:
		a.remaining = AddSat(a.remaining, amount)
		a.moved = AddSat(a.moved, amount)
		a.stale = true
	default:
		a.stale, a.credits = true, a.credits+1
	}
}

// Credited tells a leased ledger that another process credited a user's
// balance (token false) or raised what a key may still spend (token
// true), id 0 meaning any of them (announcements may have been missed):
// the next request that does not fit the slice looks at the balance again
// rather than being refused from what the last renewal saw. Without
// leases the next sync reads the balance.
func (l *Ledger) Credited(token bool, id int64) {
	if l.leases == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == 0 {
		for _, a := range l.accounts {
			a.stale, a.credits = true, a.credits+1
		}
		return
	}
	if a, ok := l.accounts[accountKey{token, id}]; ok {
		a.stale, a.credits = true, a.credits+1
	}
}

// Debited ends a hold whose amount was taken from the store's balances
// directly (a task's reservation, debited when the task is stored): the
// amount stops counting as reserved and is gone from what remains.
func (l *Ledger) Debited(h Hold, now time.Time) {
	if h.Windows != nil {
		// a task's windows count what it reserved, at now (the ids it
		// was stored with: WindowHold.IDsAt), whoever pays it
		h.Windows.settleAt(now, h.Windows.Amount())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []accountKey{{false, h.UserID}, {true, h.TokenID}} {
		if a, ok := l.accounts[k]; ok {
			a.reserved = subSat(a.reserved, h.Amount)
			a.remaining = subSat(a.remaining, h.Amount)
			a.moved = subSat(a.moved, h.Amount)
			a.settled = AddSat(a.settled, h.Amount)
			a.commits++ // a store read from before the debit is stale
		}
	}
}

// Returned adds amount back to a user's and token's known balances after
// the store credited it (what a settled task did not cost). With leases it
// went to the balance, for the next top-up to lease.
func (l *Ledger) Returned(userID, tokenID, amount int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range []accountKey{{false, userID}, {true, tokenID}} {
		if a, ok := l.accounts[k]; ok {
			if l.leases != nil {
				a.stale, a.credits = true, a.credits+1
				continue
			}
			a.remaining = AddSat(a.remaining, amount)
			a.commits++
		}
	}
}

// Stamp is a point in an account's commit history, taken before reading the
// store, so that Sync can tell whether the read is still current.
type Stamp struct {
	ok      bool
	commits uint64
}

// StampUser and StampToken take a stamp before a store read.
func (l *Ledger) StampUser(id int64) Stamp  { return l.stamp(accountKey{false, id}) }
func (l *Ledger) StampToken(id int64) Stamp { return l.stamp(accountKey{true, id}) }

func (l *Ledger) stamp(k accountKey) Stamp {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.accounts[k]; ok {
		return Stamp{ok: true, commits: a.commits}
	}
	return Stamp{}
}

// SyncUser replaces the user's remaining balance with what the store said,
// so changes made by other processes (the CLI, another instance) show up.
// A read that raced with a commit is dropped; the next sync takes it.
func (l *Ledger) SyncUser(s Stamp, u *store.User) {
	l.sync(s, accountKey{false, u.ID}, u.Quota, true)
}

// SyncToken does the same for a token's own limit.
func (l *Ledger) SyncToken(s Stamp, t *store.Token) {
	l.sync(s, accountKey{true, t.ID}, t.QuotaLimit-t.UsedQuota, t.QuotaLimit > 0)
}

func (l *Ledger) sync(s Stamp, k accountKey, remaining int64, limited bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.accounts[k]
	if !ok || !s.ok || a.commits != s.commits {
		return
	}
	// unflushed costs are not in the store yet: keep counting them
	a.remaining, a.limited, a.syncedAt, a.loaded = remaining, limited, time.Now(), true
}

// Refresh re-reads from the store every account last synced longer than
// maxAge ago, and forgets accounts idle for longer than idle with nothing
// reserved or unflushed (nor, with leases, leased). The gateway runs it in
// the background, so quota changed by another process takes effect within
// about maxAge. With leases the renewals do that (RunLeases), and Refresh
// only forgets.
func (l *Ledger) Refresh(ctx context.Context, st store.Store, maxAge, idle time.Duration) {
	now := time.Now()
	var stale []accountKey
	l.mu.Lock()
	for k, a := range l.accounts {
		switch {
		case a.reserved == 0 && a.unflushed == 0 && !a.leased && now.Sub(a.usedAt) > idle:
			delete(l.accounts, k)
		case l.leases != nil:
		case now.Sub(a.syncedAt) > maxAge:
			stale = append(stale, k)
		}
	}
	l.mu.Unlock()
	for _, k := range stale {
		if ctx.Err() != nil {
			return
		}
		s := l.stamp(k)
		if k.token {
			if t, err := st.TokenByID(ctx, k.id); err == nil {
				l.SyncToken(s, t)
			}
		} else if u, err := st.UserByID(ctx, k.id); err == nil {
			l.SyncUser(s, u)
		}
	}
}
