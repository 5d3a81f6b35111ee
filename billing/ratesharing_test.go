package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Three limiters on one database, as three instances, hold one key's rpm
// and max_parallel in sum: once each has synced the key, never more than
// the limit, and together close to it.
func TestSharedLimitsHoldInSum(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			stores := open(t, 3)
			const sync = 50 * time.Millisecond
			var ls []*billing.Limiter
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i, st := range stores {
				l := billing.NewSharedLimiter(st, billing.ShareConfig{Owner: "instance-" + string(rune('a'+i)), Sync: sync})
				go l.RunSync(ctx)
				ls = append(ls, l)
			}
			const rpm, parallel = 30, 3
			lim := store.Limits{RPM: rpm, MaxParallel: parallel}
			admit := func(l *billing.Limiter) (billing.Ticket, bool) {
				tk, refused := l.Admit(time.Now(), 1, lim, 1, store.Limits{})
				return tk, refused == nil
			}
			// each instance serves the key once, and then they know of each other
			admitted := 0
			for _, l := range ls {
				tk, ok := admit(l)
				if !ok {
					t.Fatal("the first request was refused")
				}
				tk.Done(time.Now(), 0)
				admitted++
			}
			time.Sleep(10 * sync)
			// max_parallel: held at once across the instances, never more
			// than the limit
			var held []billing.Ticket
			for range 3 {
				for _, l := range ls {
					if tk, ok := admit(l); ok {
						held = append(held, tk)
					}
				}
			}
			if len(held) != parallel {
				t.Fatalf("%d requests at once through three instances, max_parallel %d", len(held), parallel)
			}
			admitted += len(held)
			for _, tk := range held {
				tk.Done(time.Now(), 0)
			}
			// rpm: hammered through all three for a few syncs
			deadline := time.Now().Add(6 * sync)
			for time.Now().Before(deadline) {
				for _, l := range ls {
					if tk, ok := admit(l); ok {
						tk.Done(time.Now(), 0)
						admitted++
					}
				}
				time.Sleep(time.Millisecond)
			}
			if admitted > rpm || admitted < rpm-parallel {
				t.Fatalf("%d requests admitted in the minute through three instances, rpm %d", admitted, rpm)
			}
		})
	}
}

// An instance that stops drops its reports: the others see it gone at
// once, not when its reports run out.
func TestSharedLimitsWithdrawnAtStop(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			stores := open(t, 3)
			const sync = 50 * time.Millisecond
			lim := store.Limits{RPM: 30}
			stops := make([]func(), 2)
			for i := range stops {
				l := billing.NewSharedLimiter(stores[i], billing.ShareConfig{Owner: "instance-" + string(rune('a'+i)), Sync: sync})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); l.RunSync(ctx) }()
				stops[i] = func() { cancel(); <-done }
				t.Cleanup(stops[i])
				// a key's first request here syncs it before it is admitted
				tk, refused := l.Admit(time.Now(), 1, lim, 1, store.Limits{})
				if refused != nil {
					t.Fatal(refused)
				}
				tk.Done(time.Now(), 0)
			}
			others := func() int {
				got, err := stores[2].ShareRates(context.Background(), "probe", time.Now().Add(sync), []store.RateUse{{Token: true, ID: 1}})
				if err != nil {
					t.Fatal(err)
				}
				return got[0].Owners // the key's: the test limits the key
			}
			// both report at their next sync
			for deadline := time.Now().Add(time.Minute); others() != 2; time.Sleep(sync) {
				if time.Now().After(deadline) {
					t.Fatalf("%d instances report the key's use, want 2", others())
				}
			}
			stops[0]()
			if n := others(); n != 1 {
				t.Fatalf("after one instance stopped, %d report the key's use, want 1", n)
			}
		})
	}
}
