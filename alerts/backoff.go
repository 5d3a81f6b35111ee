package alerts

import "time"

// Backoff is the wait after the attempt-th failed attempt (1 for the
// first): base doubled each attempt, at most limit.
func Backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt; i++ {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}
