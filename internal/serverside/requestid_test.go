package serverside

import (
	"testing"
	"time"
)

// Request ids made one after another sort in the order they were made
// (across milliseconds) and never repeat, so the usage table's request-id
// index grows at its end.
func TestRequestIDsSortByTime(t *testing.T) {
	seen := map[string]bool{}
	prev := NewRequestID()
	for i := range 2000 {
		if i%500 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		id := NewRequestID()
		if len(id) != 32 || !WellFormedRequestID(id) {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %s repeated", id)
		}
		seen[id] = true
		if id[:12] < prev[:12] {
			t.Fatalf("id %s made after %s sorts before it", id, prev)
		}
		prev = id
	}
	first, last := NewRequestID(), ""
	time.Sleep(2 * time.Millisecond)
	last = NewRequestID()
	if last <= first {
		t.Errorf("an id made 2 ms later (%s) does not sort after %s", last, first)
	}
}
