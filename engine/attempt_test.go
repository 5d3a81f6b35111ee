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
