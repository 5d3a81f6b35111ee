package kling

import "time"

// WithClock returns a signing its tokens at now, for the external tests.
func WithClock(a Adapter, now func() time.Time) Adapter {
	a.now = now
	return a
}
