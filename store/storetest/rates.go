package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Each owner sees the sums of the others' live reports, never its own,
// and how many others there are and sort before it.
func testShareRates(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	later := time.Now().Add(time.Minute)
	share := func(owner string, until time.Time, u store.RateUse) store.RateShare {
		t.Helper()
		got, err := s.ShareRates(ctx, owner, until, []store.RateUse{u, {Token: !u.Token, ID: u.ID}})
		if err != nil || len(got) != 2 {
			t.Fatalf("share rates for %s: %+v, %v", owner, got, err)
		}
		if got[1] != (store.RateShare{}) {
			t.Fatalf("the other kind of the same id shares %+v", got[1])
		}
		return got[0]
	}
	if got := share("b", later, store.RateUse{Token: true, ID: 7, Requests: 3, Tokens: 30, Parallel: 1}); got != (store.RateShare{}) {
		t.Fatalf("first report sees %+v", got)
	}
	if got := share("c", later, store.RateUse{Token: true, ID: 7, Requests: 5, Tokens: 50, Parallel: 2}); got != (store.RateShare{Requests: 3, Tokens: 30, Parallel: 1, Owners: 1, Before: 1}) {
		t.Fatalf("c sees %+v", got)
	}
	if got := share("a", later, store.RateUse{Token: true, ID: 7}); got != (store.RateShare{Requests: 8, Tokens: 80, Parallel: 3, Owners: 2, Before: 0}) {
		t.Fatalf("a sees %+v", got)
	}
	// a report of nothing is dropped; an expired one counts for nothing
	if got := share("b", later, store.RateUse{Token: true, ID: 7}); got != (store.RateShare{Requests: 5, Tokens: 50, Parallel: 2, Owners: 1, Before: 0}) {
		t.Fatalf("b sees %+v", got)
	}
	share("c", time.Now().Add(-time.Second), store.RateUse{Token: true, ID: 7, Requests: 9})
	if got := share("b", later, store.RateUse{Token: true, ID: 7}); got != (store.RateShare{}) {
		t.Fatalf("b sees an expired report: %+v", got)
	}
}
