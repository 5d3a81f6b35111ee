// Package load is the benchmark's load generator: closed-loop and open-loop
// drivers, an OpenAI chat client that validates every answer, and the
// latency recorder they share. It imports nothing from the gateway.
package load

import (
	"math"
	"slices"
	"time"
)

// Recorder keeps every latency it is given; percentiles are exact. A run of
// a few hundred thousand requests costs a few megabytes, which is cheaper
// than being wrong about a p99.
type Recorder struct {
	d      []time.Duration
	sorted bool
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.d = append(r.d, d)
	r.sorted = false
}

// Merge adds all of o's latencies to r.
func (r *Recorder) Merge(o *Recorder) {
	if o == nil || len(o.d) == 0 {
		return
	}
	r.d = append(r.d, o.d...)
	r.sorted = false
}

// Count is how many latencies were recorded.
func (r *Recorder) Count() int { return len(r.d) }

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100), or 0
// when nothing was recorded.
func (r *Recorder) Percentile(p float64) time.Duration {
	if len(r.d) == 0 {
		return 0
	}
	if !r.sorted {
		slices.Sort(r.d)
		r.sorted = true
	}
	rank := int(math.Ceil(p / 100 * float64(len(r.d))))
	rank = min(max(rank, 1), len(r.d))
	return r.d[rank-1]
}

// Mean is the arithmetic mean, or 0 when nothing was recorded.
func (r *Recorder) Mean() time.Duration {
	if len(r.d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range r.d {
		sum += d
	}
	return sum / time.Duration(len(r.d))
}

// Max is the largest latency recorded.
func (r *Recorder) Max() time.Duration { return r.Percentile(100) }

// Result is what one driver run produced. Drivers give each worker its own
// Result and merge them at the end, so Op implementations need no locking.
type Result struct {
	Latency Recorder // send (or scheduled send) to the whole answer
	TTFE    Recorder // streams: send to the first event
	OK      int      // answers that passed validation
	Errors  int      // transport errors, bad statuses, invalid answers
	// Streams whose event count differed from what the upstream sent.
	EventMismatch int
	Events        int64 // stream events received, [DONE] excluded
	FirstError    string
	Elapsed       time.Duration // first send to last answer
}

// Fail counts an error, keeping the first message.
func (r *Result) Fail(err error) {
	r.Errors++
	if r.FirstError == "" {
		r.FirstError = err.Error()
	}
}

// Merge folds o into r; Elapsed becomes the larger of the two.
func (r *Result) Merge(o *Result) {
	r.Latency.Merge(&o.Latency)
	r.TTFE.Merge(&o.TTFE)
	r.OK += o.OK
	r.Errors += o.Errors
	r.EventMismatch += o.EventMismatch
	r.Events += o.Events
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.Elapsed = max(r.Elapsed, o.Elapsed)
}

// Requests is every request that got an outcome.
func (r *Result) Requests() int { return r.OK + r.Errors }
