package load

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// StreamSet is many streams held open at once, for measuring what an open
// stream costs the server.
type StreamSet struct {
	opened  atomic.Int64 // streams that got their first event or failed
	failed  atomic.Int64 // streams that failed before their first event
	results []Result
	wg      sync.WaitGroup
	begin   time.Time
}

// OpenStreams starts n streams on c, at most parallel of them connecting at
// a time (a burst of thousands of connects would overflow the listener's
// accept queue and measure SYN retries instead).
func OpenStreams(ctx context.Context, c *Client, n, parallel int) *StreamSet {
	s := &StreamSet{results: make([]Result, n), begin: time.Now()}
	sem := make(chan struct{}, parallel)
	for i := range n {
		s.wg.Go(func() {
			sem <- struct{}{}
			c.stream(ctx, time.Now(), &s.results[i], func(ok bool) {
				if !ok {
					s.failed.Add(1)
				}
				s.opened.Add(1)
				<-sem
			})
		})
	}
	return s
}

// Opened is how many streams have their first event (or failed).
func (s *StreamSet) Opened() int { return int(s.opened.Load()) }

// WaitOpened waits until every stream has its first event or failed, or
// until timeout; it returns how many are settled.
func (s *StreamSet) WaitOpened(n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for s.Opened() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return s.Opened()
}

// Failed counts the streams that failed before their first event.
func (s *StreamSet) Failed() int { return int(s.failed.Load()) }

// Wait waits for every stream to end and returns the merged result.
func (s *StreamSet) Wait() *Result {
	s.wg.Wait()
	total := &Result{}
	for i := range s.results {
		total.Merge(&s.results[i])
	}
	total.Elapsed = time.Since(s.begin)
	return total
}
