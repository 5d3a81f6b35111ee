package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// lease asks for one lease and returns the grant.
func lease(t *testing.T, s store.Store, owner string, until time.Time, a store.LeaseAccount, want, keep int64) store.Lease {
	t.Helper()
	got, err := s.LeaseBalances(context.Background(), owner, until, []store.LeaseRequest{{Account: a, Want: want, Keep: keep}})
	if err != nil {
		t.Fatalf("lease %+v for %s: %v", a, owner, err)
	}
	if len(got) != 1 || got[0].Account != a {
		t.Fatalf("lease %+v for %s: got %+v", a, owner, got)
	}
	return got[0]
}

func testLeaseBalances(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "lessee", 100)
	ua := store.LeaseAccount{ID: u.ID}
	later := time.Now().Add(time.Minute)

	steps := []struct {
		owner      string
		want, keep int64
		amount     int64
		free       int64
	}{
		{"a", 60, 0, 60, 40},
		{"b", 60, 0, 40, 0},  // only what a does not hold
		{"a", 10, 0, 10, 50}, // a gives back 50
		{"b", 90, 0, 90, 0},
		{"a", 30, 5, 10, 0}, // what is left, at least keep
		{"a", 0, 0, 0, 10},  // dropped
	}
	for i, st := range steps {
		l := lease(t, s, st.owner, later, ua, st.want, st.keep)
		if l.Amount != st.amount || l.Free != st.free {
			t.Fatalf("step %d (%s wants %d): got %d, free %d; want %d, free %d", i, st.owner, st.want, l.Amount, l.Free, st.amount, st.free)
		}
	}
	// a lease is a claim, not a debit: the balance is what it was
	if got := mustGetUser(t, s, u.ID).Quota; got != 100 {
		t.Fatalf("quota %d after leasing, want 100", got)
	}
	// a balance lowered under a lease: keep is granted still, free goes negative
	if err := s.AddQuota(ctx, u.ID, -95); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, s, "a", later, ua, 20, 4); l.Amount != 4 || l.Free != 5-90-4 {
		t.Fatalf("under a lowered balance: %+v, want 4 kept, free %d", l, 5-90-4)
	}

	// what cannot reach need is given back, down to keep
	if l := lease(t, s, "a", later, ua, 20, 4); l.Amount != 4 {
		t.Fatalf("before need: %+v", l)
	}
	got, err := s.LeaseBalances(ctx, "b", later, []store.LeaseRequest{{Account: ua, Want: 200, Keep: 7, Need: 150}})
	if err != nil || got[0].Amount != 7 || got[0].Free != 5-4-7 {
		t.Fatalf("a lease short of its need: %+v, %v; want 7 kept, free %d", got, err, 5-4-7)
	}
	if err := s.AddQuota(ctx, u.ID, 200); err != nil {
		t.Fatal(err)
	}
	got, err = s.LeaseBalances(ctx, "b", later, []store.LeaseRequest{{Account: ua, Want: 200, Keep: 7, Need: 150}})
	if err != nil || got[0].Amount != 200 || got[0].Free != 205-4-200 {
		t.Fatalf("a lease that meets its need: %+v, %v", got, err)
	}
	if _, err := s.LeaseBalances(ctx, "b", later, []store.LeaseRequest{{Account: ua}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddQuota(ctx, u.ID, -200); err != nil {
		t.Fatal(err)
	}

	// a token's own limit is leased like a user's quota; a token without
	// one, or an account that does not exist, grants nothing
	tok := mustToken(t, s, u.ID, "leasetoken")
	ta := store.LeaseAccount{Token: true, ID: tok.ID}
	if l := lease(t, s, "a", later, ta, 10, 0); l.Amount != 0 {
		t.Fatalf("a token without a limit granted %+v", l)
	}
	tok.QuotaLimit = 30
	if err := s.UpdateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{{UserID: u.ID, TokenID: tok.ID, Model: "m", Cost: 5}}); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, s, "a", later, ta, 40, 0); l.Amount != 25 || l.Free != 0 {
		t.Fatalf("token lease %+v, want 25 of a limit of 30 with 5 used", l)
	}
	if l := lease(t, s, "a", later, store.LeaseAccount{ID: u.ID + 1000}, 10, 3); l.Amount != 0 {
		t.Fatalf("a missing user granted %+v", l)
	}

	// several accounts in one call, each answered in its place
	got, err = s.LeaseBalances(ctx, "c", later, []store.LeaseRequest{{Account: ta, Want: 1}, {Account: ua, Want: 1}})
	if err != nil || len(got) != 2 || got[0].Account != ta || got[1].Account != ua {
		t.Fatalf("two leases: %+v, %v", got, err)
	}
}

// An expired lease counts for nothing: a killed instance's slice comes
// back once it runs out, and DropExpiredLeases tidies it away.
func testLeaseExpiry(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "expiring", 100)
	ua := store.LeaseAccount{ID: u.ID}
	soon := time.Now().Add(300 * time.Millisecond)
	if l := lease(t, s, "killed", soon, ua, 100, 0); l.Amount != 100 {
		t.Fatalf("grant %+v", l)
	}
	if l := lease(t, s, "alive", time.Now().Add(time.Minute), ua, 100, 0); l.Amount != 0 {
		t.Fatalf("a live lease's slice was leased again: %+v", l)
	}
	time.Sleep(400 * time.Millisecond)
	if n, err := s.DropExpiredLeases(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("dropped %d, %v before their time", n, err)
	}
	if l := lease(t, s, "alive", time.Now().Add(time.Minute), ua, 100, 0); l.Amount != 100 {
		t.Fatalf("an expired lease was not given back: %+v", l)
	}
	if n, err := s.DropExpiredLeases(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("dropped %d, %v; want the one expired lease", n, err)
	}
	// the owner of the expired lease comes back: it gets only what is free
	if l := lease(t, s, "killed", time.Now().Add(time.Minute), ua, 50, 0); l.Amount != 0 {
		t.Fatalf("the expired owner got %+v", l)
	}
}

// Many owners on several stores race for one balance: together they are
// granted exactly the balance, never more, and each grant is what it says.
func testInstancesLeaseRace(t *testing.T, open InstancesOpener) {
	ctx := context.Background()
	stores := open(t, instances)
	u := mustUser(t, stores[0], "raced", 1000)
	ua := store.LeaseAccount{ID: u.ID}
	const callers = 30
	grants := make([]int64, callers)
	errs := make([]error, callers)
	race(stores, callers, func(i int, s store.Store) {
		// each owner asks twice: growing its own lease must not count it twice
		for _, want := range []int64{20, 50} {
			got, err := s.LeaseBalances(ctx, fmt.Sprintf("owner-%d", i), time.Now().Add(time.Minute),
				[]store.LeaseRequest{{Account: ua, Want: want}})
			if err != nil {
				errs[i] = err
				return
			}
			grants[i] = got[0].Amount
		}
	})
	var sum int64
	for i, g := range grants {
		if errs[i] != nil {
			t.Fatalf("owner %d: %v", i, errs[i])
		}
		if g < 0 || g > 50 {
			t.Fatalf("owner %d granted %d", i, g)
		}
		sum += g
	}
	if sum != 1000 {
		t.Fatalf("granted %d in all, want exactly the balance of 1000", sum)
	}
	// every slice taken: one more owner gets nothing, from any store
	for i, s := range stores {
		if l := lease(t, s, "late", time.Now().Add(time.Minute), ua, 1, 0); l.Amount != 0 || l.Free != 0 {
			t.Fatalf("store %d: a late owner got %+v", i, l)
		}
	}
}
