package engine

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Causes of an attempt's end that the relay tells apart.
var (
	ErrStreamIdle = errors.New("stream idle timeout")
	ErrTimeout    = errors.New("upstream timeout")
	// ErrDrainTimeout ends a stream read on after its client left (see
	// NewStreamAttempt) that did not end within the drain's time bound.
	ErrDrainTimeout = errors.New("drain timeout")
	// errBodyEnd ends the wait for a body's end after the stream's
	// (EndBody)
	errBodyEnd = errors.New("no end of the body after the stream's")
)

// Attempt is one try on one channel: its context ends with the client,
// with the channel's whole-answer timeout (non-streamed requests), or
// when a stream stays silent for longer than its idle timeout. A stream
// may outlive its client for a bounded time (NewStreamAttempt).
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

	// a stream's context does not end with the client's by itself:
	// ClientGone does that, or arms the drain timer when one is allowed
	stopGone func() bool
	mu       sync.Mutex
	drain    time.Duration // 0: none; the client's end ends the attempt
	left     bool          // the client has gone
	drainEnd *time.Timer
}

// idleChecks is how often per idle period a stream's timer looks for
// events.
const idleChecks = 4

// A stream's idle timer starts with its headers (response_header_timeout
// bounds the wait for them); a non-streamed answer's timer at once. A
// stream made here ends with its client (NewStreamAttempt may outlive it).
func NewAttempt(parent context.Context, timeout, streamIdle time.Duration, stream bool) *Attempt {
	if stream {
		return NewStreamAttempt(parent, streamIdle, 0)
	}
	ctx, cancel := context.WithCancelCause(parent)
	at := &Attempt{Ctx: ctx, cancel: cancel}
	at.timer = time.AfterFunc(timeout, func() { cancel(ErrTimeout) })
	return at
}

// NewStreamAttempt is a stream's attempt that may outlive its client by
// drain (0: not at all), so that the usage its upstream reports only at
// its end is still read: from the client's leaving its context lasts
// drain more at most, then ends with ErrDrainTimeout; the stream's idle
// timeout and response_header_timeout still apply. A client gone before
// the attempt starts ends it at once.
func NewStreamAttempt(parent context.Context, streamIdle, drain time.Duration) *Attempt {
	// detached from the client, whose leaving is watched instead
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	at := &Attempt{Ctx: ctx, cancel: cancel, idle: streamIdle, drain: drain}
	if parent.Err() != nil {
		at.drain = 0
	}
	at.stopGone = context.AfterFunc(parent, at.ClientGone)
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

// ClientGone is the client's leaving, seen by the relay (a write that
// failed) or by the request's context, whichever comes first: the attempt
// ends, or its drain starts. Calls after the first do nothing.
func (at *Attempt) ClientGone() {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.left {
		return
	}
	at.left = true
	if at.drain <= 0 {
		at.cancel(context.Canceled)
		return
	}
	at.drainEnd = time.AfterFunc(at.drain, func() { at.cancel(ErrDrainTimeout) })
}

// End stops the attempt's timers and cancels its context.
func (at *Attempt) End() {
	if at.timer != nil {
		at.timer.Stop()
	}
	if at.stopGone != nil {
		at.stopGone()
		at.mu.Lock()
		if at.drainEnd != nil {
			at.drainEnd.Stop()
		}
		at.left = true // a late ClientGone arms nothing
		at.mu.Unlock()
	}
	at.cancel(context.Canceled)
}

// Bounds of EndBody: how long the end of a body may come after the
// stream's, and how many bytes may come before it.
const (
	bodyEndWait = 100 * time.Millisecond
	bodyEndMax  = 4 << 10
)

// EndBody reads what is left of an upstream's body once its stream has
// ended (HTTP/1.1's last chunk, which comes just after [DONE] or
// message_stop): a body read to its end gives its connection back to the
// transport's idle pool, where one whose attempt ends before that is
// closed, and the next request dials a new one (at concurrency 1, one
// stream in eight did). An upstream that sends more, or holds the body
// open, is cut after bodyEndMax bytes or bodyEndWait and its connection
// closed.
func (at *Attempt) EndBody(body io.Reader) {
	t := time.AfterFunc(bodyEndWait, func() { at.cancel(errBodyEnd) })
	_, _ = io.CopyN(io.Discard, body, bodyEndMax)
	t.Stop()
}
