package keys

import (
	"fmt"
	"testing"
	"time"
)

func TestLRUBounded(t *testing.T) {
	l := NewLRU(3)
	now := time.Now()
	for i := range 10 {
		l.Add(fmt.Sprint(i), now)
	}
	if l.Len() != 3 || l.Seen("0", now, time.Minute) || !l.Seen("9", now, time.Minute) {
		t.Fatalf("len %d: the oldest keys must go first", l.Len())
	}
	if l.Seen("9", now.Add(2*time.Minute), time.Minute) {
		t.Fatal("an entry older than the window was seen")
	}
	if n := l.Count("a", now, time.Minute); n != 1 {
		t.Fatal(n)
	}
	l.Count("a", now, time.Minute)
	if l.Peek("a", now, time.Minute) != 2 || l.Peek("a", now.Add(2*time.Minute), time.Minute) != 0 {
		t.Fatal("count or its window wrong")
	}
	if l.Count("a", now.Add(2*time.Minute), time.Minute) != 1 {
		t.Fatal("a count must restart after its window")
	}
}
