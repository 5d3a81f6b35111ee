package engine

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/cache"
	"github.com/caddy-model-gateway/gateway/routing"
)

// What a channel's failed attempt leads to, as its log line says.
const (
	FailedTryingNext = "channel failed; trying the next channel"
	FailedNoNext     = "channel failed; no other channel to try"
	FailedMidAnswer  = "channel failed mid-answer; the answer ends with an error"
)

// FailureLogInterval is how often, at most, a failing channel is logged:
// during an outage every request fails, and a line a second with a count
// says what a line a request would.
const FailureLogInterval = time.Second

// Observer is told of each channel failure the engine counts, so metrics
// agree with the channel's own count. The server layer implements it.
type Observer interface {
	// ChannelFailed: an attempt on the channel failed by the channel's
	// fault with the client-facing status; failover says whether another
	// channel is tried after it.
	ChannelFailed(channel string, status int, failover bool)
}

// Attempter makes one attempt on one channel: nil when the channel
// answered (the endpoint keeps what it needs to relay the answer), else
// why not.
type Attempter interface {
	Try(ch *routing.Channel) *Failure
}

// AttemptFunc is a function as an Attempter.
type AttemptFunc func(ch *routing.Channel) *Failure

// Try calls f.
func (f AttemptFunc) Try(ch *routing.Channel) *Failure { return f(ch) }

// Engine plans channels and fails over between them. Its fields are set
// once per configuration and read by every request.
type Engine struct {
	Channels *routing.Set
	// Upstreams are the channels' adapters, clients and bounds, by name
	Upstreams *UpstreamTable
	// MaxAttempts is the retry budget: the most channels one request tries
	MaxAttempts int
	Health      routing.HealthPolicy
	// FailureLog throttles the failure log line per channel
	FailureLog *routing.LogThrottle
	Log        *zap.Logger
	Observer   Observer // may be nil
	// Prices by model; DefaultMaxTokens is the output a priced model
	// without max_output reserves; PartTokens what one image part of a
	// model's prompt reserves
	Prices           *PriceTable
	DefaultMaxTokens int64
	PartTokens       func(model string) int64
	// Gate admits requests and settles them; Rows and Meter record them
	Gate  *billing.Gate
	Rows  RowWriter
	Meter Meter
	// TraceContent is trace_content: the bytes of message content a
	// traced request records, 0 for none
	TraceContent int
	// Affinity keeps conversations on one channel and key; nil: off
	Affinity *routing.Affinity
	// Drain bounds reading a stream on after its client has gone
	Drain DrainBounds
	// Cache is the exact response cache; nil: off
	Cache *cache.Cache
}

// Run tries the plan's channels in order until one answers, and returns
// it. A failure that is not the channel's fault (the request's own, or the
// client gone) ends the run at once; a channel's failure is counted and
// the next channel tried. Failovers stop when the client has gone (ctx
// ends). With no channel that answered, the failure is the last channel's.
func (e *Engine) Run(ctx context.Context, model string, plan []*routing.Channel, try Attempter) (*routing.Channel, *Failure) {
	return e.run(ctx.Done(), model, plan, try)
}

// RunDetached is Run for a request that outlives its client: failovers go
// on to the end of the plan after the client has gone. A task submit runs
// so, since the vendor may hold the job already and the stored task must
// get an outcome; its attempts use a context of their own.
func (e *Engine) RunDetached(model string, plan []*routing.Channel, try Attempter) (*routing.Channel, *Failure) {
	return e.run(nil, model, plan, try)
}

// run is the one failover loop; clientGone is nil for a detached run.
func (e *Engine) run(clientGone <-chan struct{}, model string, plan []*routing.Channel, try Attempter) (*routing.Channel, *Failure) {
	var last *Failure
	for i, ch := range plan {
		if i > 0 && closed(clientGone) {
			return nil, ClientClosed()
		}
		f := try.Try(ch)
		if f == nil {
			ch.Succeeded()
			return ch, nil
		}
		if f.Err.Status == adapters.StatusClientClosed || !f.Channel {
			return nil, f
		}
		last = f
		e.failed(ch, f, i+1 < len(plan))
	}
	if last == nil {
		return nil, &Failure{Err: adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "no channel is available for model %q", model)}
	}
	return nil, last
}

// closed reports whether c is closed; a nil c never is.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// failed counts an attempt's failure by the channel's fault: for the
// channel's ejection (Retry-After honoured), for metrics, in the log.
func (e *Engine) failed(ch *routing.Channel, f *Failure, next bool) {
	if e.Observer != nil {
		e.Observer.ChannelFailed(ch.Name, f.Err.Status, next)
	}
	if ch.Failed(e.Health, time.Now(), f.RetryAfter) {
		e.Log.Warn("channel ejected", zap.String("channel", ch.Name), zap.Int("status", f.logStatus()))
	}
	ch.NoteFailure(f.logStatus(), f.summary())
	msg := FailedNoNext
	if next {
		msg = FailedTryingNext
	}
	e.LogFailure(ch, f, msg)
}

// FailedMidAnswer counts a failure of the channel after its answer began
// (a stream or body that broke off): the client's answer ends with an
// error, so no other channel is tried.
func (e *Engine) FailedMidAnswer(ch *routing.Channel, f *Failure) {
	if e.Observer != nil {
		e.Observer.ChannelFailed(ch.Name, f.Err.Status, false)
	}
	ch.FailedMidAnswer(e.Health, time.Now())
	ch.NoteFailure(f.logStatus(), f.summary())
	e.LogFailure(ch, f, FailedMidAnswer)
}

// LogFailure logs a channel's failure, once a FailureLogInterval per
// channel, with the number of failures the line stands for; msg says what
// the failure led to.
func (e *Engine) LogFailure(ch *routing.Channel, f *Failure, msg string) {
	ok, n := e.FailureLog.Allow(ch.Name, time.Now())
	if !ok {
		return
	}
	if ce := e.Log.Check(zap.WarnLevel, msg); ce != nil {
		ce.Write(zap.String("channel", ch.Name), zap.Int("status", f.logStatus()), zap.String("error", f.Err.Message),
			zap.String("upstream", f.Detail), zap.Int("failures", n))
	}
}

// UpstreamFailure classifies an upstream's error answer (see Classify).
// The upstream's own words go to the log only, keys masked: a channel's
// fault in the throttled failure line, a refusal of the request at once.
func (e *Engine) UpstreamFailure(ch *routing.Channel, ue *adapters.Error, header http.Header) *Failure {
	f := Classify(ch.Name, ch.Keys, ue, header)
	if f.Channel {
		f.Detail = upstreamDetail(ue, ch.Keys)
	} else if ce := e.Log.Check(zap.WarnLevel, "upstream answered with an error"); ce != nil {
		ce.Write(zap.String("channel", ch.Name), zap.Int("status", ue.Status), zap.String("type", string(ue.Type)),
			zap.String("code", ue.Code), zap.String("upstream_message", MaskKeys(ue.Message, ch.Keys)))
	}
	return f
}
