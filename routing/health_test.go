package routing

import (
	"testing"
	"time"
)

func TestEjection(t *testing.T) {
	p := HealthPolicy{ConsecutiveFailures: 3, BaseEjection: 10 * time.Second, MaxEjection: 25 * time.Second}
	a := &Channel{Name: "a", Models: []string{"m"}, Priority: 1}
	b := &Channel{Name: "b", Models: []string{"m"}}
	s := NewSet([]*Channel{a, b})
	now := time.Now()
	for i := 1; i <= 3; i++ {
		if got := a.Failed(p, now, 0); got != (i == 3) {
			t.Fatalf("failure %d: ejected = %v", i, got)
		}
	}
	if got := names(s.Plan("m", 5)); len(got) != 1 || got[0] != "b" {
		t.Fatalf("plan with a ejected = %v, want [b]", got)
	}
	// every channel ejected: try them all anyway
	b.Failed(p, now, time.Minute)
	if got := s.Plan("m", 5); len(got) != 2 {
		t.Fatalf("plan with all ejected = %v, want both", names(got))
	}
	// the second ejection is twice as long, the third capped
	later := now.Add(11 * time.Second)
	if a.Ejected(later) {
		t.Fatal("a still ejected after its first ejection time")
	}
	for range 3 {
		a.Failed(p, later, 0)
	}
	if !a.Ejected(later.Add(19*time.Second)) || a.Ejected(later.Add(21*time.Second)) {
		t.Fatal("the second ejection should last 20s")
	}
	later = later.Add(21 * time.Second)
	for range 3 {
		a.Failed(p, later, 0)
	}
	if !a.Ejected(later.Add(24*time.Second)) || a.Ejected(later.Add(26*time.Second)) {
		t.Fatal("the third ejection should be capped at 25s")
	}
	// a success resets the count
	later = later.Add(time.Minute)
	a.Failed(p, later, 0)
	a.Failed(p, later, 0)
	a.Succeeded()
	if a.Failed(p, later, 0) {
		t.Fatal("ejected although a success came between the failures")
	}
	if st := s.States(); len(st) != 2 || st[0].Name != "a" || st[0].Ejections != 3 || st[0].ConsecutiveFailures != 1 {
		t.Fatalf("states = %+v", st)
	}
	// Retry-After is capped by the maximum too
	b.Failed(p, later, time.Hour)
	if !b.Ejected(later.Add(24*time.Second)) || b.Ejected(later.Add(26*time.Second)) {
		t.Fatal("a Retry-After ejection must be capped at max_ejection")
	}
}

// Failing counts failures since the last success across ejections, so
// metrics and the health endpoint read the channel's own record.
func TestFailingSinceSuccess(t *testing.T) {
	p := HealthPolicy{ConsecutiveFailures: 2, BaseEjection: time.Second, MaxEjection: time.Second}
	c := &Channel{Name: "a"}
	now := time.Now()
	for range 3 {
		c.Failed(p, now, 0)
	}
	if c.Failing() != 3 || c.State(now).ConsecutiveFailures != 1 {
		t.Fatalf("failing %d, toward ejection %d; want 3 and 1", c.Failing(), c.State(now).ConsecutiveFailures)
	}
	c.Succeeded()
	if c.Failing() != 0 {
		t.Fatalf("failing %d after a success", c.Failing())
	}
}

// Attempts count once each: an answer, a failure before one, and an
// answer that broke off (counted when it began, failed when it broke).
func TestChannelAttemptsCounted(t *testing.T) {
	c := &Channel{Name: "c"}
	p := HealthPolicy{ConsecutiveFailures: 3, BaseEjection: time.Minute, MaxEjection: time.Minute}
	now := time.Now()
	c.Failed(p, now, 0)
	if s := c.State(now); s.State != StateFailing || s.Attempts != 1 || s.FailedAttempts != 1 || s.Failing != 1 {
		t.Fatalf("after a failure: %+v", s)
	}
	c.Succeeded()
	c.FailedMidAnswer(p, now)
	if s := c.State(now); s.State != StateFailing || s.Attempts != 2 || s.FailedAttempts != 2 {
		t.Fatalf("after an answer that broke off: %+v", s)
	}
	c.Succeeded()
	if s := c.State(now); s.State != StateInService || s.Attempts != 3 || s.FailedAttempts != 2 || s.Failing != 0 {
		t.Fatalf("after an answer: %+v", s)
	}
	for range 3 {
		c.Failed(p, now, 0)
	}
	if s := c.State(now); s.State != StateEjected || s.Attempts != 6 || s.FailedAttempts != 5 {
		t.Fatalf("after three failures in a row: %+v", s)
	}
}
