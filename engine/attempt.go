package engine

import (
	"context"
	"errors"
	"time"
)

// Causes of an attempt's end that the relay tells apart.
var (
	ErrStreamIdle = errors.New("stream idle timeout")
	ErrTimeout    = errors.New("upstream timeout")
)

// Attempt is one try on one channel: its context ends with the client,
// with the channel's whole-answer timeout (non-streamed requests), or
// when a stream stays silent for longer than its idle timeout.
type Attempt struct {
	// Ctx is the attempt's context, for the upstream request
	Ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration // 0: a non-streamed request, timed as a whole
}

// A stream's idle timer starts with its headers (response_header_timeout
// bounds the wait for them); a non-streamed answer's timer at once.
func NewAttempt(parent context.Context, timeout, streamIdle time.Duration, stream bool) *Attempt {
	ctx, cancel := context.WithCancelCause(parent)
	at := &Attempt{Ctx: ctx, cancel: cancel}
	if stream {
		at.idle = streamIdle
	} else {
		at.timer = time.AfterFunc(timeout, func() { cancel(ErrTimeout) })
	}
	return at
}

// Alive (re)starts a stream's idle timer, at its headers and after each
// event.
func (at *Attempt) Alive() {
	if at.idle <= 0 {
		return
	}
	if at.timer == nil {
		at.timer = time.AfterFunc(at.idle, func() { at.cancel(ErrStreamIdle) })
		return
	}
	at.timer.Reset(at.idle)
}

// Cause is why the attempt's context ended, nil while it has not.
func (at *Attempt) Cause() error {
	if at.Ctx.Err() == nil {
		return nil
	}
	return context.Cause(at.Ctx)
}

// End stops the attempt's timer and cancels its context.
func (at *Attempt) End() {
	if at.timer != nil {
		at.timer.Stop()
	}
	at.cancel(context.Canceled)
}
