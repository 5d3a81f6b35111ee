package tasks

import (
	"testing"
	"time"
)

func TestTaskBackoff(t *testing.T) {
	p := New(Config{PollInterval: time.Second, MaxPollInterval: 4 * time.Second}, Deps{})
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond, 4 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := p.backoff(i + 1); got != w {
			t.Errorf("poll %d waits %s, want %s", i+1, got, w)
		}
	}
	if id := NewID(); len(id) != len("task_")+26 || id == NewID() {
		t.Fatalf("task ids %q", id)
	}
}
