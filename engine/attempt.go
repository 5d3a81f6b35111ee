package engine

import (
	"context"
	"errors"
	"sync/atomic"
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

	// A stream's idle timer is not reset at every event: a reset takes
	// the timer heap's lock, about 1 µs a stream of 20 events. An
	// event bumps events instead, and the timer looks every idle /
	// idleChecks: after idleChecks looks in a row that saw no event the
	// stream is ended, so silence ends it after between idle and idle
	// plus a quarter. seen and quiet are the timer's own.
	events atomic.Uint64
	seen   uint64
	quiet  int
}

// idleChecks is how often per idle period a stream's timer looks for
// events.
const idleChecks = 4

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
		// armed by Reset once at.timer is set: the check reads it
		at.timer = time.AfterFunc(time.Hour, at.checkIdle)
		at.timer.Reset(at.idleCheck())
		return
	}
	at.events.Add(1)
}

func (at *Attempt) idleCheck() time.Duration { return max(at.idle/idleChecks, time.Millisecond) }

// checkIdle is the idle timer's look: it ends a stream that sent no event
// in its last idleChecks looks, and otherwise looks again, until the
// attempt ends.
func (at *Attempt) checkIdle() {
	if at.Ctx.Err() != nil {
		return
	}
	if n := at.events.Load(); n != at.seen {
		at.seen, at.quiet = n, 0
	} else if at.quiet++; at.quiet >= idleChecks {
		at.cancel(ErrStreamIdle)
		return
	}
	at.timer.Reset(at.idleCheck())
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
