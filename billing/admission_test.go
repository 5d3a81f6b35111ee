package billing

import (
	"errors"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

type fakeQueue struct {
	err   error
	taken []bool // priced, per slot taken
}

func (q *fakeQueue) Admit(priced bool) error {
	if q.err != nil {
		return q.err
	}
	q.taken = append(q.taken, priced)
	return nil
}

func newGate(q *fakeQueue) *Gate {
	return &Gate{Limiter: NewLimiter(), Ledger: NewLedger(), Usage: q}
}

func TestGateAdmitsAndSettles(t *testing.T) {
	q := &fakeQueue{}
	g := newGate(q)
	u, tok := &store.User{ID: 1, Quota: 100}, &store.Token{ID: 2}
	now := time.Now()
	ad, err := g.Admit(now, Ask{User: u, Token: tok, Slot: true, Reserve: Reserve(60)})
	if err != nil || !ad.Slot || ad.Hold.Amount != 60 || len(q.taken) != 1 || !q.taken[0] {
		t.Fatalf("admission %+v, %v; slots %v", ad, err, q.taken)
	}
	if avail, _ := g.Ledger.Available(1); avail != 40 {
		t.Fatalf("available %d while 60 are reserved, want 40", avail)
	}
	g.Settle(now, ad, 10, 25)
	if avail, _ := g.Ledger.Available(1); avail != 75 {
		t.Fatalf("available %d after a cost of 25, want 75", avail)
	}
}

func TestGateOrder(t *testing.T) {
	u := &store.User{ID: 1, Quota: 10}
	limited := &store.Token{ID: 2, Limits: store.Limits{RPM: 1}}
	now := time.Now()

	t.Run("rate limits before the reservation", func(t *testing.T) {
		g := newGate(&fakeQueue{})
		if _, err := g.Admit(now, Ask{User: u, Token: limited, Reserve: Reserve(1)}); err != nil {
			t.Fatal(err)
		}
		asked := false
		_, err := g.Admit(now, Ask{User: u, Token: limited, Reserve: func() (int64, error) { asked = true; return 1, nil }})
		var r *Refusal
		if !errors.As(err, &r) || r.Limit != "rpm" || asked {
			t.Fatalf("second request in a minute of rpm 1: %v (reservation asked: %v)", err, asked)
		}
	})
	t.Run("a full usage queue before the ledger", func(t *testing.T) {
		g := newGate(&fakeQueue{err: ErrQueueFull})
		ad, err := g.Admit(now, Ask{User: u, Token: &store.Token{ID: 3}, Slot: true, Reserve: Reserve(5)})
		if !errors.Is(err, ErrQueueFull) || ad.Hold.Amount != 0 {
			t.Fatalf("%+v, %v", ad, err)
		}
	})
	t.Run("quota refusal keeps the slot for the row", func(t *testing.T) {
		g := newGate(&fakeQueue{})
		ad, err := g.Admit(now, Ask{User: u, Token: &store.Token{ID: 4}, Slot: true, Reserve: Reserve(50)})
		var q *QuotaRefusal
		if !errors.As(err, &q) || q.Amount != 50 || q.Available != 10 || !ad.Slot {
			t.Fatalf("%+v, %v", ad, err)
		}
	})
	t.Run("a reservation's own refusal", func(t *testing.T) {
		g := newGate(&fakeQueue{})
		mine := errors.New("no room")
		if _, err := g.Admit(now, Ask{User: u, Token: &store.Token{ID: 5}, Reserve: func() (int64, error) { return 0, mine }}); err != mine {
			t.Fatal(err)
		}
	})
}

// A Realtime response counts toward rpm and tpm, but not toward
// max_parallel, which its session holds.
func TestGateInSession(t *testing.T) {
	g := newGate(&fakeQueue{})
	u := &store.User{ID: 1, Quota: 1000}
	tok := &store.Token{ID: 2, Limits: store.Limits{RPM: 2, MaxParallel: 1}}
	now := time.Now()
	session, err := g.Admit(now, Ask{User: u, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.Admit(now, Ask{User: u, Token: tok, Rate: RateInSession, Reserve: Reserve(10)})
	if err != nil {
		t.Fatalf("a response within the session: %v", err)
	}
	g.Settle(now, resp, 0, 10)
	var r *Refusal
	if _, err := g.Admit(now, Ask{User: u, Token: tok, Rate: RateInSession}); !errors.As(err, &r) || r.Limit != "rpm" {
		t.Fatalf("a third request in a minute of rpm 2: %v", err)
	}
	g.Settle(now, session, 0, 0)
}

func TestTicketUsedCountsTokensAndKeepsTheSlot(t *testing.T) {
	l := NewLimiter()
	lim := store.Limits{TPM: 100, MaxParallel: 1}
	now := time.Now()
	tk, r := l.Admit(now, 1, lim, 2, store.Limits{})
	if r != nil {
		t.Fatal(r)
	}
	tk.Used(now, 100)
	if _, r := l.Admit(now, 1, store.Limits{TPM: 100}, 2, store.Limits{}); r == nil || r.Limit != "tpm" {
		t.Fatalf("tpm after 100 tokens used: %v", r)
	}
	if _, r := l.Admit(now, 1, store.Limits{MaxParallel: 1}, 2, store.Limits{}); r == nil || r.Limit != "max_parallel" {
		t.Fatalf("max_parallel while the ticket is held: %v", r)
	}
	tk.Done(now, 0)
	if _, r := l.Admit(now, 1, store.Limits{MaxParallel: 1}, 2, store.Limits{}); r != nil {
		t.Fatalf("max_parallel after Done: %v", r)
	}
}

// Precheck refuses what Admit would refuse whatever the request asks (a
// limit with no room, a balance with nothing left for a priced model),
// takes nothing, and lets through what only the body can decide.
func TestGatePrecheck(t *testing.T) {
	now := time.Now()
	priced := func() bool { return false }
	free := func() bool { return true }
	g := newGate(&fakeQueue{})
	u := &store.User{ID: 1, Quota: 100}
	one := &store.Token{ID: 2, Limits: store.Limits{RPM: 1, MaxParallel: 1}}
	if err := g.Precheck(now, u, one, priced); err != nil {
		t.Fatalf("a key with room: %v", err)
	}
	if err := g.Precheck(now, u, one, priced); err != nil {
		t.Fatalf("a second look took something: %v", err)
	}
	ad, err := g.Admit(now, Ask{User: u, Token: one, Reserve: Reserve(10)})
	if err != nil {
		t.Fatal(err)
	}
	var r *Refusal
	if err := g.Precheck(now, u, one, priced); !errors.As(err, &r) || r.Of != "key" || r.Limit != "max_parallel" {
		t.Fatalf("a key with its one request in flight: %v", err)
	}
	g.Settle(now, ad, 0, 10)
	if err := g.Precheck(now, u, one, priced); !errors.As(err, &r) || r.Limit != "rpm" || r.RetryAfter <= 0 {
		t.Fatalf("a key past its rpm: %v", err)
	}
	// the user's own limits count every key's requests
	g = newGate(&fakeQueue{})
	busy := &store.User{ID: 3, Quota: 100, Limits: store.Limits{MaxParallel: 1}}
	if _, err := g.Admit(now, Ask{User: busy, Token: &store.Token{ID: 4}, Reserve: Reserve(1)}); err != nil {
		t.Fatal(err)
	}
	if err := g.Precheck(now, busy, &store.Token{ID: 5}, priced); !errors.As(err, &r) || r.Of != "user" {
		t.Fatalf("another key of a user at max_parallel: %v", err)
	}

	// a balance with nothing left: refused unless the key may use a free model
	empty := &store.User{ID: 6, Quota: 0}
	var q *QuotaRefusal
	if err := g.Precheck(now, empty, &store.Token{ID: 7}, priced); !errors.As(err, &q) || q.Available > 0 {
		t.Fatalf("an empty balance: %v", err)
	}
	if err := g.Precheck(now, empty, &store.Token{ID: 7}, free); err != nil {
		t.Fatalf("an empty balance and a free model: %v", err)
	}
	// a token's own limit used up, on a user with a balance
	spent := &store.Token{ID: 8, QuotaLimit: 50, UsedQuota: 50}
	if err := g.Precheck(now, u, spent, priced); !errors.As(err, &q) {
		t.Fatalf("a token whose own limit is spent: %v", err)
	}
	// a balance all held by requests in flight: Admit would refuse too
	held := &store.User{ID: 9, Quota: 30}
	if _, err := g.Admit(now, Ask{User: held, Token: &store.Token{ID: 10}, Reserve: Reserve(30)}); err != nil {
		t.Fatal(err)
	}
	if err := g.Precheck(now, held, &store.Token{ID: 10}, priced); !errors.As(err, &q) {
		t.Fatalf("a balance all reserved: %v", err)
	}
	if err := g.Precheck(now, &store.User{ID: 11, Quota: 1}, &store.Token{ID: 12}, priced); err != nil {
		t.Fatalf("a balance of one unit: %v", err)
	}

	// a plan in force may pay where the balance cannot; its rate limits
	// count
	b, err := (&BudgetConfig{
		Plans:  map[string]*PlanConfig{"pro": {Windows: map[string]string{"weekly": "1"}, MaxParallel: 1}},
		Groups: map[string]*GroupConfig{"team": {Plan: "pro"}},
	}).Build(&Spend{Clock: func() time.Time { return now }}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	g = &Gate{Limiter: NewLimiter(), Ledger: NewLedger(), Usage: &fakeQueue{}, Budgets: b}
	sub, tok := &store.User{ID: 13, Quota: 0}, &store.Token{ID: 14}
	b.users = map[int64]*userBudget{13: {b: store.UserBudget{Group: "team"}, loaded: now}}
	b.keys = map[int64]*keyBudget{14: {loaded: now}}
	if err := g.Precheck(now, sub, tok, priced); err != nil {
		t.Fatalf("an empty balance on a plan: %v", err)
	}
	if _, err := g.Admit(now, Ask{User: sub, Token: tok, Model: "m", Reserve: Reserve(10)}); err != nil {
		t.Fatal(err)
	}
	if err := g.Precheck(now, sub, &store.Token{ID: 15}, priced); !errors.As(err, &r) || r.Of != "user" || r.Limit != "max_parallel" {
		t.Fatalf("a user at the plan's max_parallel: %v", err)
	}
}
