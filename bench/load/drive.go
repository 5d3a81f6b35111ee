package load

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Op performs one request. start is the instant latency is measured from:
// the real send time in a closed loop, the scheduled send time in an open
// loop. It records its outcome in res, which belongs to the calling worker.
type Op func(ctx context.Context, start time.Time, res *Result)

// ClosedLoop runs conc workers, each sending its next request as soon as the
// previous one is answered, until dur has passed.
func ClosedLoop(ctx context.Context, conc int, dur time.Duration, op Op) *Result {
	results := make([]Result, conc)
	begin := time.Now()
	deadline := begin.Add(dur)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			res := &results[i]
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(deadline) {
					break
				}
				op(ctx, now, res)
			}
		})
	}
	wg.Wait()
	total := &Result{}
	for i := range results {
		total.Merge(&results[i])
	}
	total.Elapsed = time.Since(begin)
	return total
}

// ClosedLoopN is ClosedLoop stopping after n requests in all instead of a
// duration (used for warm-ups).
func ClosedLoopN(ctx context.Context, conc, n int, op Op) *Result {
	results := make([]Result, conc)
	begin := time.Now()
	work := make(chan struct{}, n)
	for range n {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			for range work {
				if ctx.Err() != nil {
					return
				}
				op(ctx, time.Now(), &results[i])
			}
		})
	}
	wg.Wait()
	total := &Result{}
	for i := range results {
		total.Merge(&results[i])
	}
	total.Elapsed = time.Since(begin)
	return total
}

// OpenLoop schedules requests at a fixed rate for dur, whatever the target's
// speed, and measures each latency from its scheduled send time, so a slow
// answer cannot hide the requests queued behind it (no coordinated
// omission). workers bounds the requests in flight; when all are busy the
// schedule queues and the queueing shows in the latencies. It returns after
// every scheduled request has finished.
func OpenLoop(ctx context.Context, rate float64, dur time.Duration, workers int, op Op) *Result {
	n := int(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	queue := make(chan time.Time, n)
	results := make([]Result, workers)
	lastDone := make([]time.Time, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for at := range queue {
				op(ctx, at, &results[i])
				lastDone[i] = time.Now()
			}
		})
	}
	// the schedule keeps a thread of its own, so it can sleep with the
	// kernel's precision (sleepFor): a late wake-up is counted in every
	// latency, and Go's timers wake up to a millisecond late on an idle
	// process, which alone would break a p99 bound of 1 ms
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	begin := time.Now()
	for i := 0; i < n && ctx.Err() == nil; {
		now := time.Now()
		// send everything due; sleeping per request would be too coarse at
		// thousands per second, and latency counts from the schedule anyway
		for ; i < n; i++ {
			at := begin.Add(time.Duration(i) * interval)
			if at.After(now) {
				sleepFor(at.Sub(now))
				break
			}
			queue <- at
		}
	}
	close(queue)
	wg.Wait()
	total := &Result{}
	end := begin
	for i := range results {
		total.Merge(&results[i])
		if lastDone[i].After(end) {
			end = lastDone[i]
		}
	}
	total.Elapsed = end.Sub(begin)
	return total
}
