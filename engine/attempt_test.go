package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestAttemptCauses(t *testing.T) {
	at := NewAttempt(context.Background(), 10*time.Millisecond, time.Hour, false)
	<-at.Ctx.Done()
	if !errors.Is(at.Cause(), ErrTimeout) {
		t.Errorf("a whole answer past its timeout: %v", at.Cause())
	}
	at = NewAttempt(context.Background(), time.Hour, 10*time.Millisecond, true)
	if at.Cause() != nil {
		t.Fatal("a stream's idle timer ran before its headers")
	}
	at.Alive()
	<-at.Ctx.Done()
	if !errors.Is(at.Cause(), ErrStreamIdle) {
		t.Errorf("a silent stream: %v", at.Cause())
	}
	at = NewAttempt(context.Background(), time.Hour, time.Hour, false)
	at.End()
	if errors.Is(at.Cause(), ErrTimeout) || at.Ctx.Err() == nil {
		t.Errorf("an ended attempt: %v", at.Cause())
	}
}

// A stream whose events keep coming, each well within the idle timeout,
// is not ended however long it runs; once it falls silent it is.
func TestAttemptIdleOnlyWhenSilent(t *testing.T) {
	const idle = 40 * time.Millisecond
	at := NewAttempt(context.Background(), time.Hour, idle, true)
	defer at.End()
	at.Alive()     // the headers
	for range 30 { // 300 ms: seven and a half idle periods
		time.Sleep(idle / 4)
		if at.Ctx.Err() != nil {
			t.Fatalf("a stream with an event every %v was ended: %v", idle/4, at.Cause())
		}
		at.Alive()
	}
	select {
	case <-at.Ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a silent stream was never ended")
	}
	if !errors.Is(at.Cause(), ErrStreamIdle) {
		t.Fatalf("a silent stream: %v", at.Cause())
	}
}

// A stream attempt outlives its client only when it was given a
// drain, and then for the drain's time at most.
func TestAttemptDrainsAfterClientGone(t *testing.T) {
	client, leave := context.WithCancel(context.Background())
	at := NewAttempt(client, time.Hour, time.Hour, true)
	leave()
	select {
	case <-at.Ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a stream without a drain outlived its client")
	}
	at.End()

	client, leave = context.WithCancel(context.Background())
	at = NewStreamAttempt(client, time.Hour, time.Second)
	defer at.End()
	leave()
	at.ClientGone() // the relay seeing it too changes nothing
	if at.Ctx.Err() != nil {
		t.Fatalf("a draining stream ended with its client: %v", at.Cause())
	}
	<-at.Ctx.Done()
	if !errors.Is(at.Cause(), ErrDrainTimeout) {
		t.Fatalf("a drain past its time: %v", at.Cause())
	}

	// a client gone before the attempt began gets no drain
	at = NewStreamAttempt(client, time.Hour, time.Hour)
	defer at.End()
	select {
	case <-at.Ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an attempt for a client already gone was drained")
	}
}
