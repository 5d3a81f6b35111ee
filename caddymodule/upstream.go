package caddymodule

import (
	"errors"
	"io"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// failure is the task submit's record of a failed attempt, until the task
// engine runs on engine.Run: logFailure turns it into an engine.Failure.
type failure struct {
	err    *adapters.Error
	detail string
}

// failover is the log line of a failed attempt before any answer, when
// next says whether another channel is tried.
func failover(next bool) string {
	if next {
		return engine.FailedTryingNext
	}
	return engine.FailedNoNext
}

// logFailure logs a channel's failed attempt through the engine's throttle.
func (a *App) logFailure(log *zap.Logger, ch *routing.Channel, f *failure, msg string) {
	e := *a.engine
	e.Log = log
	e.LogFailure(ch, &engine.Failure{Err: f.err, Detail: f.detail, Channel: true}, msg)
}

// maskKeys hides the channel's keys in upstream text bound for the log.
func maskKeys(s string, keys []string) string { return engine.MaskKeys(s, keys) }

// transportFailure classifies an attempt that got no answer at all.
func (h *Relay) transportFailure(ch *routing.Channel, at *attempt, err error) *engine.Failure {
	detail := maskKeys(err.Error(), ch.Keys)
	var ne net.Error
	if errors.Is(at.cause(), errTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		return &engine.Failure{Channel: true, Detail: detail, Err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream channel %q did not answer in time: retry shortly", ch.Name)}
	}
	return &engine.Failure{Channel: true, Detail: detail, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
		"the upstream channel %q could not be reached", ch.Name)}
}

// streamFailure classifies a stream that broke before its first event
// reached the client, or after (then only err's words are used).
func (h *Relay) streamFailure(ch *routing.Channel, at *attempt, b channelBounds, err error) *engine.Failure {
	switch cause := at.cause(); {
	case errors.Is(cause, errStreamIdle):
		return &engine.Failure{Channel: true, Err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q sent nothing for %s (its stream_idle_timeout)", ch.Name, b.streamIdle)}
	case errors.Is(err, adapters.ErrEventTooLarge):
		return &engine.Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q sent a stream event larger than the gateway's limit of %d bytes (max_stream_event)", ch.Name, b.maxStreamEvent)}
	}
	var e *adapters.Error
	if errors.As(err, &e) {
		return h.engine.UpstreamFailure(ch, e, nil)
	}
	msg := "the upstream stream broke off before its end"
	if errors.Is(err, io.EOF) {
		msg = "the upstream stream ended before any event"
	}
	return &engine.Failure{Channel: true, Detail: maskKeys(err.Error(), ch.Keys), Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%s (channel %q)", msg, ch.Name)}
}
