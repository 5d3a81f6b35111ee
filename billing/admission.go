package billing

import (
	"errors"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Gate is the one admission path of every endpoint: a request is admitted
// in the order rate limits, reservation, usage-queue slot, ledger, and
// what it took is given back by Settle. Chat, media, rerank, Realtime's
// responses and task submits all pass here, so a limit holds the same for
// each of them.
type Gate struct {
	Limiter *Limiter
	Ledger  *Ledger
	Usage   UsageQueue
	// Limits are the rate limits of a token that has none of its own
	Limits store.Limits
	// Budgets are the spending windows and plans; nil for none
	Budgets *Budgets
}

// UsageQueue hands out slots for usage rows (the Writer).
type UsageQueue interface {
	Admit(priced bool) error
}

// RateMode is which rate limits an admission takes.
type RateMode int

// Rate modes.
const (
	// RateRequest takes rpm, tpm and a max_parallel slot held until Settle.
	RateRequest RateMode = iota
	// RateInSession takes rpm and tpm only: a Realtime response, whose
	// session holds the max_parallel slot.
	RateInSession
	// RateNone takes no rate limit (they were taken already).
	RateNone
)

// Ask is what one admission asks for.
type Ask struct {
	User  *store.User
	Token *store.Token
	Rate  RateMode
	// Slot takes a usage-queue slot for the request's row; a priced
	// request is refused while rows cannot be recorded
	Slot bool
	// Reserve is the worst-case cost, asked once the rate limits are
	// taken (it may read the ledger's room and refuse with its own
	// error); nil reserves nothing and takes no slot
	Reserve func() (int64, error)
	// Model is the model asked for, which a plan may pay for; "" leaves
	// plans out (the balance pays), within the windows that apply
	Model string
	// Scaled applies the plan's multiplier for Model when the plan pays:
	// the caller charges the settled cost through Hold.Windows.Charge.
	// Tasks, settled by the store at their stored prices, leave it unset.
	Scaled bool
}

// Admission is what a request holds, to be given back by Settle. A refused
// request holds what it took before the refusal: its row still uses the
// slot.
type Admission struct {
	Ticket Ticket
	Hold   Hold
	Slot   bool
	// Amount is what was reserved, or asked for when the ledger refused
	Amount int64
}

// QuotaRefusal is a reservation the ledger refused.
type QuotaRefusal struct {
	Amount    int64 // what was asked for
	Available int64 // what the user may still spend (0 or less: used up)
}

func (q *QuotaRefusal) Error() string {
	return fmt.Sprintf("quota: %d units asked, %d available", q.Amount, q.Available)
}

// UsageRefusal is a usage-queue slot refused: the queue is full (Err is
// ErrQueueFull) or rows cannot be recorded.
type UsageRefusal struct{ Err error }

func (u *UsageRefusal) Error() string { return "usage queue: " + u.Err.Error() }
func (u *UsageRefusal) Unwrap() error { return u.Err }

func (r *Refusal) Error() string {
	return fmt.Sprintf("rate limit %s of the %s (%d)", r.Limit, r.Of, r.Value)
}

// Admit takes, in order, the rate limits, the reservation, a usage-queue
// slot and the ledger's hold. The error is a *Refusal (rate limits), an
// error of ask.Reserve, a *UsageRefusal (also when leasing quota failed)
// or a *QuotaRefusal; whatever the
// outcome, the Admission is settled by Settle.
func (g *Gate) Admit(now time.Time, ask Ask) (Admission, error) {
	var ad Admission
	prof, err := g.profile(now, ask)
	if err != nil {
		return ad, err
	}
	if ask.Rate != RateNone {
		tl := Effective(ask.Token.Limits, g.Limits)
		ul := prof.Limits(ask.User.Limits)
		if ask.Rate == RateInSession {
			tl.MaxParallel, ul.MaxParallel = 0, 0
		}
		t, refused := g.Limiter.Admit(now, ask.Token.ID, tl, ask.User.ID, ul)
		if refused != nil {
			return ad, refused
		}
		ad.Ticket = t
	}
	if ask.Reserve == nil {
		return ad, nil
	}
	amount, err := ask.Reserve()
	if err != nil {
		return ad, err
	}
	ad.Amount = amount
	if ask.Slot {
		if err := g.Usage.Admit(amount > 0); err != nil {
			return ad, &UsageRefusal{Err: err}
		}
		ad.Slot = true
	}
	wh, err := g.holdWindows(now, prof, ask.Model, amount, ask.Scaled)
	if err != nil {
		return ad, err
	}
	ledgerAmount := amount
	if wh.PlanPaid() {
		ledgerAmount = 0
	}
	hold, err := g.Ledger.Hold(ask.User, ask.Token, ledgerAmount)
	if err != nil {
		wh.settle(0)
	}
	hold.Windows = wh
	if lu := (*LeaseUnavailable)(nil); errors.As(err, &lu) {
		// the balance is not known: billing is what is unavailable
		return ad, &UsageRefusal{Err: fmt.Errorf("%w: %w", ErrUnavailable, lu)}
	}
	if err != nil {
		return ad, err
	}
	ad.Hold = hold
	return ad, nil
}

// Precheck refuses, before a request's body is read, what Admit would
// refuse whatever the body says: a rate limit of the key or the user with
// no room (looked at, not taken), or a balance with nothing left to hold
// when the request cannot be free. costless reports whether the key may
// use a model that costs nothing, which an empty balance still pays for;
// it is asked only of an empty balance. A plan in force may pay where the
// balance cannot, so it leaves the balance to Admit. The error is a
// *Refusal, a *QuotaRefusal or a *UsageRefusal, as Admit's.
func (g *Gate) Precheck(now time.Time, u *store.User, t *store.Token, costless func() bool) error {
	prof, err := g.profile(now, Ask{User: u, Token: t})
	if err != nil {
		return err
	}
	if r := g.Limiter.Check(now, t.ID, Effective(t.Limits, g.Limits), u.ID, prof.Limits(u.Limits)); r != nil {
		return r
	}
	if prof != nil && prof.Plan != nil {
		return nil
	}
	if avail, empty := g.Ledger.empty(u, t, now); empty && !costless() {
		return &QuotaRefusal{Available: avail}
	}
	return nil
}

// empty reports whether the user's balance, or the token's own limit,
// has nothing left to hold: what Hold would refuse any amount above zero
// on. available is the empty account's room (0 or less). With leases it
// is the slice's room and the balance no lease holds, as Room has them:
// from memory while the slices are fresh (the background renewals keep
// an active account's so), else after one store call (which Hold would
// make too, for an account it has not seen); a balance the store cannot
// tell is not empty.
func (l *Ledger) empty(u *store.User, t *store.Token, now time.Time) (available int64, empty bool) {
	available, empty, stale := l.emptyKnown(u, t, now)
	if stale {
		_ = l.topUp(u, t, 0) // on failure the room known is all there is
		available, empty, _ = l.emptyKnown(u, t, now)
	}
	return available, empty
}

// emptyKnown is empty from what the ledger holds; stale is whether a
// leased slice it needs is not fresh (and so said not empty).
func (l *Ledger) emptyKnown(u *store.User, t *store.Token, now time.Time) (available int64, empty, stale bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	leased := l.leases != nil
	ua := l.load(accountKey{false, u.ID}, u.Quota, true)
	ta := l.load(accountKey{true, t.ID}, t.QuotaLimit-t.UsedQuota, t.QuotaLimit > 0)
	for _, a := range [2]*account{ua, ta} {
		if a == ta && !ta.limited {
			continue
		}
		if leased && (!l.fresh(a, now) || !now.Before(a.expires)) {
			stale = true
			continue
		}
		if room := a.spendable(leased); room <= 0 {
			return room, true, false
		}
	}
	return 0, false, stale
}

// Reserve is an admission of a fixed amount.
func Reserve(amount int64) func() (int64, error) {
	return func() (int64, error) { return amount, nil }
}

// Settle gives back what an admission took once the request's cost is
// known: the rate limits (its tokens counted toward tpm) and the ledger's
// hold, charged cost. The usage row, which the slot is for, is the
// caller's to write.
func (g *Gate) Settle(now time.Time, ad Admission, tokens, cost int64) {
	ad.Ticket.Done(now, tokens)
	g.Ledger.Settle(ad.Hold, cost)
}

// TaskSettled gives back what a stored task did not cost (refund), once
// the store settled it: to the balance the ledger knows when the balance
// paid (plan ""), and out of the windows its reservation was counted in
// (windows, the ids it was stored with).
func (g *Gate) TaskSettled(userID, tokenID int64, plan, windows string, refund int64) {
	if plan == "" {
		g.Ledger.Returned(userID, tokenID, refund)
	}
	if g.Budgets != nil && g.Budgets.Spend != nil {
		g.Budgets.Spend.Refund(windows, refund)
	}
}
