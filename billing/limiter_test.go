package billing

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// admitMany admits from many goroutines at once and counts what passed.
func admitMany(l *Limiter, n int, now time.Time, tl, ul store.Limits, userOf func(i int) int64, hold bool) (int64, []Ticket) {
	var ok atomic.Int64
	var mu sync.Mutex
	var tickets []Ticket
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, r := l.Admit(now, int64(i%3)+1, tl, userOf(i), ul)
			if r != nil {
				return
			}
			ok.Add(1)
			if hold {
				mu.Lock()
				tickets = append(tickets, t)
				mu.Unlock()
			} else {
				t.Done(now, 0)
			}
		}()
	}
	wg.Wait()
	return ok.Load(), tickets
}

func TestLimiterRPMIsExactUnderConcurrency(t *testing.T) {
	l := NewLimiter()
	now := time.Unix(1_000_000, 0)
	// user limit 25 a minute across three keys each allowed 10
	got, _ := admitMany(l, 200, now, store.Limits{RPM: 10}, store.Limits{RPM: 25}, func(int) int64 { return 1 }, false)
	if got != 25 {
		t.Fatalf("%d admitted, want 25", got)
	}
	for i := 0; i < 10; i++ {
		if _, r := l.Admit(now, 7, store.Limits{RPM: 10}, 2, store.Limits{}); r != nil {
			t.Fatal(r)
		}
	}
	_, r := l.Admit(now.Add(30*time.Second), 7, store.Limits{RPM: 10}, 2, store.Limits{})
	if r == nil || r.Limit != "rpm" || r.Of != "key" || r.RetryAfter != 30*time.Second {
		t.Fatalf("refusal = %+v", r)
	}
	// a minute later the window has moved on
	got, _ = admitMany(l, 200, now.Add(time.Minute), store.Limits{RPM: 10}, store.Limits{RPM: 25}, func(int) int64 { return 1 }, false)
	if got != 25 {
		t.Fatalf("a minute later %d admitted, want 25", got)
	}
}

func TestLimiterMaxParallelIsExact(t *testing.T) {
	l := NewLimiter()
	now := time.Unix(1_000_000, 0)
	got, tickets := admitMany(l, 100, now, store.Limits{MaxParallel: 4}, store.Limits{MaxParallel: 7}, func(int) int64 { return 9 }, true)
	if got != 7 {
		t.Fatalf("%d in flight, want 7", got)
	}
	for _, tk := range tickets {
		tk.Done(now, 0)
	}
	got, _ = admitMany(l, 100, now, store.Limits{MaxParallel: 4}, store.Limits{}, func(int) int64 { return 9 }, true)
	if got != 12 { // three keys of 4
		t.Fatalf("after Done, %d in flight, want 12", got)
	}
}

func TestLimiterTPM(t *testing.T) {
	l := NewLimiter()
	now := time.Unix(1_000_000, 0)
	lim := store.Limits{TPM: 100}
	tk, r := l.Admit(now, 1, lim, 1, store.Limits{})
	if r != nil {
		t.Fatal(r)
	}
	tk.Done(now, 150)
	_, r = l.Admit(now.Add(10*time.Second), 1, lim, 1, store.Limits{})
	if r == nil || r.Limit != "tpm" || r.RetryAfter != 50*time.Second {
		t.Fatalf("refusal = %+v", r)
	}
	if _, r = l.Admit(now.Add(61*time.Second), 1, lim, 1, store.Limits{}); r != nil {
		t.Fatalf("a minute later: %+v", r)
	}
}

func TestEffectiveLimits(t *testing.T) {
	got := Effective(store.Limits{RPM: 5}, store.Limits{RPM: 60, MaxParallel: 2})
	if got != (store.Limits{RPM: 5, MaxParallel: 2}) {
		t.Fatalf("%+v", got)
	}
}
