package billing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
)

// Leases: several gateway instances on one database must not spend the same
// unit, yet admitting a request must not wait on the database. So each
// instance leases a slice of every balance it serves (store.LeaseBalances:
// a claim the others cannot lease, not a debit) and the ledger admits
// against its slice alone:
//
//	remaining = the lease - costs committed since it was granted
//	sum over instances of their leases <= balance, at every grant
//
// The slice is topped up ahead of need (in the background, when less than
// half of its target is left), synchronously when a request does not fit
// it but might fit the balance (once, with room for every request waiting
// on the same top-up), and renewed on a timer, which also
// gives back what the recent spend does not need. Its target follows the
// account's spend: Min, a few of its largest requests, Horizon's worth of
// its rate, or twice the last target when that ran low within one renewal
// (a burst, before a rate is measured), at most Max; a larger request
// still gets what it asks. An account unused for two renewals holds only
// what it has in flight.
//
// A lease runs out TTL after it was granted unless renewed; the ledger
// stops admitting against it a tenth of TTL earlier, so that another
// instance's clock running that much ahead cannot reclaim a slice still
// spent here. A killed instance's leases come back when they run out; the
// rows its journal replays later are charged to the balance directly
// (rows carry keys, so none twice), which can then go below zero by at
// most what that instance had in flight when it died.

// LeaseConfig tunes leasing; zero fields take the defaults.
type LeaseConfig struct {
	// Owner names this instance's leases; unique per process run
	// (NewLeaseOwner).
	Owner string
	// TTL is how long a lease lives unrenewed. Default 1m.
	TTL time.Duration
	// Renew is how often leases are renewed and resized. Default 5s.
	Renew time.Duration
	// Horizon is how much of an account's recent spend rate its lease
	// holds. Default 10s.
	Horizon time.Duration
	// Min is the smallest target of an account in use, in units, so that
	// a light user's slice covers a while of spend. Default 100,000
	// (0.10 USD).
	Min int64
	// Max bounds a lease's target, in units. Default 10,000,000 (10 USD).
	Max int64
	// Timeout bounds one store call. Default 5s.
	Timeout time.Duration
	// Log reports renewals the store refused; nil logs nothing.
	Log *zap.Logger
}

func (c *LeaseConfig) defaults() {
	if c.TTL <= 0 {
		c.TTL = time.Minute
	}
	if c.Renew <= 0 {
		c.Renew = 5 * time.Second
	}
	if c.Horizon <= 0 {
		c.Horizon = 10 * time.Second
	}
	if c.Max <= 0 {
		c.Max = 10_000_000
	}
	if c.Min <= 0 {
		c.Min = min(100_000, c.Max)
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
}

// leasing is the ledger's link to the store it leases from.
type leasing struct {
	st   store.Store
	cfg  LeaseConfig
	kick chan struct{} // an account ran low: top it up now
}

// NewLeaseOwner is a name for this process's leases: the host, the pid
// and a random part, so that a restarted process never renews its dead
// predecessor's leases by mistake.
func NewLeaseOwner() string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// NewLeasedLedger returns a ledger that admits against slices of the
// balances in st leased to cfg.Owner. RunLeases keeps them renewed and
// ReleaseLeases gives them back.
func NewLeasedLedger(st store.Store, cfg LeaseConfig) *Ledger {
	cfg.defaults()
	if cfg.Owner == "" {
		cfg.Owner = NewLeaseOwner()
	}
	l := NewLedger()
	l.leases = &leasing{st: st, cfg: cfg, kick: make(chan struct{}, 1)}
	return l
}

// CreditFeed is a store that announces the credits any process commits
// (PostgreSQL's LISTEN/NOTIFY, store/postgres): a gateway has its ledger
// hear them (Ledger.Credited), so that a balance credited through one
// instance is spendable on every instance at the next request.
type CreditFeed interface {
	OnCredit(credited func(token bool, id int64))
}

// LeaseUnavailable is a request that did not fit this instance's slice
// and whose slice could not be topped up: the store did not answer, so
// whether the balance covers it is not known.
type LeaseUnavailable struct{ Err error }

func (e *LeaseUnavailable) Error() string { return "leasing quota: " + e.Err.Error() }
func (e *LeaseUnavailable) Unwrap() error { return e.Err }

// target is the room beyond what is in flight that an account's lease
// should hold, as the package doc says; 0 for an account unused lately.
func (c *LeaseConfig) target(a *account) int64 {
	asked := max(a.ask, a.askBefore)
	if asked == 0 && a.rate < 1 && a.boost == 0 {
		return 0
	}
	t := max(c.Min, MulSat(asked, 4), a.boost)
	if r := a.rate * c.Horizon.Seconds(); r > float64(t) {
		t = int64(min(r, float64(c.Max)))
	}
	return min(t, c.Max)
}

// inFlight is what an account's lease must keep whatever the balance
// says: admitted, and not yet charged to the store.
func (a *account) inFlight() int64 { return max(AddSat(a.unflushed, a.reserved), 0) }

// leaseCall is one store call's requests, and each account's moved when
// they were made.
type leaseCall struct {
	keys    []accountKey
	moved   []int64
	credits []uint64
	reqs    []store.LeaseRequest
}

// request adds k to the call, asking for room beyond what is in flight,
// and, when need is not zero, for nothing beyond it unless need fits.
// Called with mu held.
//
// Requests go on being admitted against the slice while the call is made,
// and what they take must stay leased whatever the store answers. So what
// the call may give back is given back here first, before the call: the
// slice is cut to what it asks for (to what is in flight, when need may
// not fit), and the store is asked to keep at least that much.
func (c *leaseCall) request(k accountKey, a *account, room, need int64) {
	inFlight := a.inFlight()
	want := AddSat(inFlight, max(room, 0))
	cut := want
	if need > 0 || !a.expires.IsZero() && !time.Now().Before(a.expires) {
		// past its time the room of a lease may be another's already
		cut = inFlight
	}
	if cut < a.remaining {
		// this call gives the cut back: the balance's free part has it
		// now, as far as this instance can tell, even before the store
		// answers (a request missing the slice meanwhile asks for a
		// top-up rather than being refused from memory)
		a.free = AddSat(a.free, a.remaining-cut)
		a.remaining = cut
	}
	keep := max(a.remaining, inFlight)
	r := store.LeaseRequest{Account: store.LeaseAccount{Token: k.token, ID: k.id},
		Want: max(want, keep), Keep: keep}
	if need > 0 {
		r.Need = AddSat(inFlight, need)
	}
	c.keys = append(c.keys, k)
	c.moved = append(c.moved, a.moved)
	c.credits = append(c.credits, a.credits)
	c.reqs = append(c.reqs, r)
}

// lease makes one store call for keys, each asking for the room and need
// size says, and applies what it granted. The requests are made and the
// grants applied holding storeMu, so no batch commits in between: the
// balance the store read and the costs the ledger counts as committed
// agree, and no other lease call's grant comes between a request and its
// own. What moved otherwise (a task's debit, an administrator's) during
// the call is applied on top.
func (l *Ledger) lease(keys []accountKey, size func(*account) (room, need int64)) error {
	if len(keys) == 0 {
		return nil
	}
	lc := l.leases
	l.storeMu.Lock()
	defer l.storeMu.Unlock()
	c := &leaseCall{}
	l.mu.Lock()
	now := time.Now()
	skip := true
	for _, k := range keys {
		a := l.load(k, 0, true)
		_, need := size(a)
		// a top-up another request made while this one waited for the
		// lock may have made room already: no call, and no cut
		skip = skip && need > 0 && a.fits(need, now)
	}
	if skip {
		l.mu.Unlock()
		return nil
	}
	for _, k := range keys {
		a := l.accounts[k]
		room, need := size(a)
		c.request(k, a, room, need)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), lc.cfg.Timeout)
	defer cancel()
	start := time.Now()
	grants, err := lc.st.LeaseBalances(ctx, lc.cfg.Owner, start.Add(lc.cfg.TTL), c.reqs)
	if err != nil {
		return err
	}
	if len(grants) != len(c.reqs) {
		return fmt.Errorf("the store answered %d leases of %d", len(grants), len(c.reqs))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range c.keys {
		a := l.load(k, 0, true)
		g := grants[i]
		a.remaining = AddSat(g.Amount, a.moved-c.moved[i])
		// a lease kept above the balance (lowered under it: another
		// process's debit) holds nothing to spend beyond what is in
		// flight; the next renewal asks the store to keep only that
		if limit := max(AddSat(g.Balance, a.moved-c.moved[i]), a.inFlight()); a.remaining > limit {
			a.remaining = limit
		}
		a.leased = g.Amount > 0
		a.expires = start.Add(lc.cfg.TTL - lc.cfg.TTL/10)
		// a credit heard during the call may not be in what it read
		a.free, a.leasedAt, a.stale, a.low = g.Free, start, a.credits != c.credits[i], false
	}
	return nil
}

// fresh is whether what the ledger knows of an account's balance (its
// lease and the free part) is recent enough to decide on.
func (l *Ledger) fresh(a *account, now time.Time) bool {
	// a renewal comes every Renew: give it one more to land
	return !a.stale && !a.leasedAt.IsZero() && now.Sub(a.leasedAt) < 2*l.leases.cfg.Renew
}

// topUp leases, synchronously, room for amount more on the user's account
// and (when limited) the token's; an account whose balance cannot cover
// amount keeps only what is in flight. Called without mu held.
func (l *Ledger) topUp(u *store.User, t *store.Token, amount int64) error {
	return l.lease(l.sides(u, t), func(a *account) (int64, int64) {
		return max(l.leases.cfg.target(a), amount, a.waiting), amount
	})
}

// waiting counts amount (taken back when negative) as asked by a request
// waiting for a top-up of the user's and token's slices.
func (l *Ledger) waiting(u *store.User, t *store.Token, amount int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.sides(u, t) {
		a := l.load(k, 0, true)
		a.waiting = AddSat(a.waiting, amount)
	}
}

// sides are the accounts a request of u with t spends from. Called with mu
// held, after load.
func (l *Ledger) sides(u *store.User, t *store.Token) []accountKey {
	keys := []accountKey{{false, u.ID}}
	if t.QuotaLimit > 0 {
		keys = append(keys, accountKey{true, t.ID})
	}
	return keys
}

// worthTopUp is whether a request that did not fit the slices might fit
// the balances: a store call is made for it only then, so a user with
// nothing left is refused from memory.
func (l *Ledger) worthTopUp(u *store.User, t *store.Token, amount int64) bool {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.sides(u, t) {
		a := l.accounts[k]
		if a == nil || !l.fresh(a, now) || !now.Before(a.expires) {
			continue
		}
		if AddSat(a.available(), max(a.free, 0)) < amount {
			return false
		}
	}
	return true
}

// RunLeases renews the ledger's leases every Renew, and tops up at once
// an account that ran low, until ctx ends.
func (l *Ledger) RunLeases(ctx context.Context) {
	lc := l.leases
	if lc == nil {
		return
	}
	tick := time.NewTicker(lc.cfg.Renew)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lc.kick:
			l.renew(false, 0)
		case now := <-tick.C:
			l.renew(true, now.Sub(last))
			last = now
			if _, err := lc.st.DropExpiredLeases(ctx, now); err != nil && ctx.Err() == nil {
				lc.cfg.Log.Warn("dropping expired leases", zap.Error(err))
			}
		}
	}
}

// renewBatch bounds the accounts of one store call.
const renewBatch = 256

// renew resizes leases: every held one on a tick (which also updates each
// account's spend rate over elapsed), only those that ran low on a kick.
func (l *Ledger) renew(all bool, elapsed time.Duration) {
	lc := l.leases
	var keys []accountKey
	l.mu.Lock()
	for k, a := range l.accounts {
		if all && elapsed > 0 {
			// an average over the last few renewals
			a.rate = a.rate/2 + float64(a.settled)/elapsed.Seconds()/2
			a.settled = 0
			a.askBefore, a.ask = a.ask, 0
			a.boost /= 2
		}
		if !(a.low || all && (a.leased || a.remaining > 0)) {
			continue
		}
		if k.token && !a.limited {
			continue
		}
		keys = append(keys, k)
	}
	l.mu.Unlock()
	for start := 0; start < len(keys); start += renewBatch {
		batch := keys[start:min(start+renewBatch, len(keys))]
		if err := l.lease(batch, renewal(&lc.cfg)); err != nil {
			lc.cfg.Log.Warn("renewing quota leases: the instance admits against what it holds until they run out",
				zap.Int("accounts", len(batch)), zap.Error(err))
		}
	}
}

// renewal sizes a renewed lease: its target, and, when its room no longer
// holds a request of the size it has lately served, a need of one: a
// fragment too small to spend is given back rather than held, so that
// near the end of a balance the fragments of several instances do not
// together hold what none of them can spend.
func renewal(cfg *LeaseConfig) func(*account) (int64, int64) {
	return func(a *account) (int64, int64) {
		need := max(a.ask, a.askBefore)
		if a.available() >= need {
			need = 0
		}
		return cfg.target(a), need
	}
}

// ReleaseLeases gives back every lease but what is still in flight (rows
// nothing committed yet: the next start's replay charges them, and until
// then no other instance leases them). The gateway calls it at shutdown,
// once the usage writer has committed what it could.
func (l *Ledger) ReleaseLeases() error {
	if l.leases == nil {
		return nil
	}
	var keys []accountKey
	l.mu.Lock()
	for k, a := range l.accounts {
		if a.leased {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	return l.lease(keys, func(*account) (int64, int64) { return 0, 0 })
}
