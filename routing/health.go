package routing

import (
	"sync"
	"sync/atomic"
	"time"
)

// HealthPolicy is when a failing channel is set aside, in the manner of
// Envoy's outlier detection: after ConsecutiveFailures failures in a row a
// channel is ejected for BaseEjection times the number of times it has been
// ejected, at most MaxEjection. A success resets the failure count.
type HealthPolicy struct {
	ConsecutiveFailures int
	BaseEjection        time.Duration
	MaxEjection         time.Duration
}

// DefaultHealthPolicy is the policy of a gateway that configures none.
var DefaultHealthPolicy = HealthPolicy{ConsecutiveFailures: 5, BaseEjection: 30 * time.Second, MaxEjection: 5 * time.Minute}

// WithDefaults is p with each figure it leaves zero taken from
// DefaultHealthPolicy: a configuration sets only what it changes.
func (p HealthPolicy) WithDefaults() HealthPolicy {
	d := DefaultHealthPolicy
	if p.ConsecutiveFailures > 0 {
		d.ConsecutiveFailures = p.ConsecutiveFailures
	}
	if p.BaseEjection > 0 {
		d.BaseEjection = p.BaseEjection
	}
	if p.MaxEjection > 0 {
		d.MaxEjection = p.MaxEjection
	}
	return d
}

// health is one channel's state. Every plan reads until, so it is atomic;
// the rest changes only on an upstream's answer, under the mutex.
type health struct {
	until    atomic.Int64 // ejected until, Unix nanoseconds; 0: never
	mu       sync.Mutex
	failures int // consecutive, toward the next ejection
	// failing counts failures since the last success, ejections or not:
	// what operators see as the channel's consecutive failures
	failing     int
	ejections   int // times ejected so far
	lastFailure time.Time
	// lastError and lastStatus say what the last failure was, for the
	// operators' channels page: a request no channel answered has a usage
	// row that names no channel
	lastError  string
	lastStatus int
	// attempts and failedAttempts count every attempt on the channel
	// that it answered or failed by its own fault, since the instance
	// started: a request no channel answered has a usage row that names
	// none, so these are the one count of a channel that never answers
	attempts, failedAttempts int64
}

// Channel states as ChannelState.State names them.
const (
	StateInService = "in_service"
	StateFailing   = "failing" // failed since its last success, not ejected (yet)
	StateEjected   = "ejected"
)

// ChannelState is a channel's health as shown to operators.
type ChannelState struct {
	Name                string    `json:"name"`
	Type                string    `json:"type"`
	Models              []string  `json:"models"`
	Ejected             bool      `json:"ejected"`
	EjectedUntil        time.Time `json:"ejected_until,omitzero"`
	Ejections           int       `json:"ejections"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	LastFailure         time.Time `json:"last_failure,omitzero"`
	// LastError and LastErrorStatus are the last failure's message and
	// status (the upstream's, or the gateway's when it did not answer).
	LastError       string `json:"last_error,omitempty"`
	LastErrorStatus int    `json:"last_error_status,omitempty"`
	// State is StateEjected, StateFailing or StateInService.
	State string `json:"state"`
	// Failing is the failures since the last success, ejections or not.
	Failing int `json:"failing"`
	// Attempts and FailedAttempts are this instance's attempts on the
	// channel since it started, and those that failed by the channel's
	// fault.
	Attempts       int64 `json:"attempts"`
	FailedAttempts int64 `json:"failed_attempts"`
}

// NoteFailure records what the channel's last failure was, as Failed
// counted it.
func (c *Channel) NoteFailure(status int, msg string) {
	h := &c.health
	h.mu.Lock()
	h.lastStatus, h.lastError = status, msg
	h.mu.Unlock()
}

// Ejected reports whether the channel is set aside at now.
func (c *Channel) Ejected(now time.Time) bool {
	return now.UnixNano() < c.health.until.Load()
}

// Succeeded records an answer from the upstream: the failure count restarts.
func (c *Channel) Succeeded() {
	h := &c.health
	h.mu.Lock()
	h.failures, h.failing = 0, 0
	h.attempts++
	h.mu.Unlock()
}

// Failing is the number of failures since the channel's last success, for
// metrics and the health endpoint: the channel's one record of them.
func (c *Channel) Failing() int {
	h := &c.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing
}

// Failed records a failure of the channel (it could not be reached, timed
// out, answered 5xx, 408 or 429, or refused its credentials) and reports
// whether it is now ejected. A retryAfter above zero (an upstream's 429
// Retry-After) ejects it for that long at once.
func (c *Channel) Failed(p HealthPolicy, now time.Time, retryAfter time.Duration) (ejected bool) {
	return c.failed(p, now, retryAfter, true)
}

// FailedMidAnswer is Failed for an attempt whose answer began (Succeeded
// counted it) and then broke off: one attempt, failed.
func (c *Channel) FailedMidAnswer(p HealthPolicy, now time.Time) (ejected bool) {
	return c.failed(p, now, 0, false)
}

func (c *Channel) failed(p HealthPolicy, now time.Time, retryAfter time.Duration, attempt bool) (ejected bool) {
	h := &c.health
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastFailure = now
	h.failures++
	h.failing++
	if attempt {
		h.attempts++
	}
	h.failedAttempts++
	if retryAfter > 0 {
		h.ejections++
		h.failures = 0
		h.until.Store(now.Add(min(retryAfter, p.MaxEjection)).UnixNano())
		return true
	}
	if p.ConsecutiveFailures <= 0 || h.failures < p.ConsecutiveFailures || now.UnixNano() < h.until.Load() {
		return false
	}
	h.ejections++
	h.failures = 0
	h.until.Store(now.Add(min(p.BaseEjection*time.Duration(h.ejections), p.MaxEjection)).UnixNano())
	return true
}

// State returns the channel's health for display.
func (c *Channel) State(now time.Time) ChannelState {
	h := &c.health
	h.mu.Lock()
	defer h.mu.Unlock()
	s := ChannelState{Name: c.Name, Type: c.Type, Models: c.Models, Ejections: h.ejections,
		ConsecutiveFailures: h.failures, LastFailure: h.lastFailure, LastError: h.lastError, LastErrorStatus: h.lastStatus,
		State: StateInService, Failing: h.failing, Attempts: h.attempts, FailedAttempts: h.failedAttempts}
	if h.failing > 0 {
		s.State = StateFailing
	}
	if until := h.until.Load(); now.UnixNano() < until {
		s.Ejected, s.EjectedUntil, s.State = true, time.Unix(0, until).UTC(), StateEjected
	}
	return s
}

// Channel returns the channel of that name, or nil.
func (s *Set) Channel(name string) *Channel {
	for _, c := range s.cur.Load().all {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// All returns every channel, in configuration order. The slice is the
// set's own: read it, do not change it.
func (s *Set) All() []*Channel { return s.cur.Load().all }

// States returns every channel's health, in configuration order.
func (s *Set) States() []ChannelState {
	now := time.Now()
	all := s.cur.Load().all
	out := make([]ChannelState, len(all))
	for i, c := range all {
		out[i] = c.State(now)
	}
	return out
}

// healthy drops ejected channels from a plan, unless all of them are
// ejected: then the plan is tried anyway, since refusing outright helps
// nobody and one of them may have recovered.
func healthy(plan []*Channel, now time.Time) []*Channel {
	ejected := 0
	for _, c := range plan {
		if c.Ejected(now) {
			ejected++
		}
	}
	if ejected == 0 || ejected == len(plan) {
		return plan
	}
	out := plan[:0]
	for _, c := range plan {
		if !c.Ejected(now) {
			out = append(out, c)
		}
	}
	return out
}
