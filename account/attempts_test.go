package account

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAttemptLimiterBounded: however many distinct (and however long) keys
// are tried within one window, the limiter holds at most its maximum, and
// the newest keys are the ones still counted.
func TestAttemptLimiterBounded(t *testing.T) {
	const maxKeys = 100
	l := newAttemptLimiter(3, time.Minute, maxKeys)
	now := time.Now()
	long := strings.Repeat("x", 60<<10)
	for i := range 10 * maxKeys {
		l.allow(now, fmt.Sprint("login ip 10.0.0.1 user ", i, long))
		if n := l.size(); n > maxKeys {
			t.Fatalf("after %d keys the limiter holds %d, more than its %d", i+1, n, maxKeys)
		}
	}
	if n := l.size(); n != maxKeys {
		t.Fatalf("the limiter holds %d keys, want %d", n, maxKeys)
	}
	last := fmt.Sprint("login ip 10.0.0.1 user ", 10*maxKeys-1, long)
	if n, _ := l.count(now, last); n != 1 {
		t.Fatalf("the newest key counts %d attempts, want 1", n)
	}
	if n, _ := l.count(now, fmt.Sprint("login ip 10.0.0.1 user ", 0, long)); n != 0 {
		t.Fatalf("the oldest key, evicted, counts %d", n)
	}
}

func TestAttemptLimiterWindows(t *testing.T) {
	l := newAttemptLimiter(2, time.Minute, maxAttemptKeys)
	now := time.Now()
	for i, want := range []bool{true, true, false} {
		if ok, _ := l.allow(now, "a"); ok != want {
			t.Fatalf("attempt %d allowed = %v", i+1, ok)
		}
	}
	if _, wait := l.allow(now.Add(20*time.Second), "a"); wait != 40*time.Second {
		t.Fatalf("wait = %v, want the rest of the window", wait)
	}
	// count and undo keep nothing for a key never tried
	if n, _ := l.count(now, "b"); n != 0 {
		t.Fatal(n)
	}
	l.undo(now, "b")
	if l.size() != 1 {
		t.Fatalf("count or undo kept a key: %d", l.size())
	}
	l.add(now, "b")
	l.undo(now, "b")
	l.undo(now, "b")
	if n, _ := l.count(now, "b"); n != 0 {
		t.Fatalf("undone below zero: %d", n)
	}
	// a new window starts afresh, and ended windows are swept
	if ok, _ := l.allow(now.Add(time.Minute), "a"); !ok {
		t.Fatal("a new window is refused")
	}
	l.allow(now.Add(2*time.Minute), "c")
	if l.size() != 1 {
		t.Fatalf("ended windows kept: %d keys", l.size())
	}
}
