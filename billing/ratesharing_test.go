package billing_test

import (
	"context"
	"sync"
	"sync/atomic"
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
			// reports live three syncs: at 50ms a loaded machine (CI with
			// other builds) let a report run out between two syncs, and
			// the others took its share (5 held at once for a max_parallel
			// of 3, 1 run in a loaded CI); at 200ms a sync a stall of
			// 600ms is needed
			const sync = 200 * time.Millisecond
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
			// reports live three syncs: at 50ms a loaded machine (CI with
			// other builds) let a report run out between two syncs, and
			// the others took its share (5 held at once for a max_parallel
			// of 3, 1 run in a loaded CI); at 200ms a sync a stall of
			// 600ms is needed
			const sync = 200 * time.Millisecond
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

// A new key's rpm holds from its first request, not from the instances'
// first periodic sync: requests sent round-robin through three instances
// that have never served the key are admitted at most once per instance
// beyond the limit (the one an instance joining may take before the
// others hold back for it), concurrently too.
func TestSharedLimitsHoldFromTheFirstRequest(t *testing.T) {
	for name, open := range drivers() {
		t.Run(name, func(t *testing.T) {
			for _, concurrent := range []bool{false, true} {
				stores := open(t, 3)
				var ls []*billing.Limiter
				for i, st := range stores {
					// no RunSync: only a key's first request syncs
					ls = append(ls, billing.NewSharedLimiter(st, billing.ShareConfig{Owner: "instance-" + string(rune('a'+i))}))
				}
				const rpm = 12
				lim := store.Limits{RPM: rpm}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for i := range 3 * rpm {
					l := ls[i%len(ls)]
					send := func() {
						if tk, refused := l.Admit(time.Now(), 7, lim, 7, store.Limits{}); refused == nil {
							admitted.Add(1)
							tk.Done(time.Now(), 0)
						}
					}
					if concurrent {
						wg.Go(send)
					} else {
						send()
					}
				}
				wg.Wait()
				n := admitted.Load()
				t.Logf("concurrent %v: %d of %d admitted through three instances, rpm %d", concurrent, n, 3*rpm, rpm)
				// sent one by one, the first instance claims the whole
				// limit and serves its part of it; at once, the claims of
				// instances joining together may hold each other back
				// until their next sync, which this test never runs
				if n > rpm+int64(len(ls))-1 || !concurrent && n < rpm {
					t.Fatalf("concurrent %v: %d requests admitted, rpm %d: want %d to %d", concurrent, n, rpm, rpm, rpm+len(ls)-1)
				}
			}
		})
	}
}
