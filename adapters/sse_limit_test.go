package adapters

import (
	"errors"
	"strings"
	"testing"
)

func TestSSEReaderMaxEvent(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100<<10) + "\n\n"
	r := NewSSEReader(strings.NewReader("data: ok\n\n" + long + "data: after\n\n"))
	r.SetMaxEvent(64 << 10)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "ok" {
		t.Fatalf("first event: %v %v", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("an event past the limit: err = %v, want ErrEventTooLarge", err)
	}
	// many short data lines add up too
	r = NewSSEReader(strings.NewReader(strings.Repeat("data: 0123456789\n", 10000) + "\n"))
	r.SetMaxEvent(64 << 10)
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("a frame of many lines past the limit: err = %v", err)
	}
}
