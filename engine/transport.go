package engine

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// TransportFailure classifies an attempt that got no answer at all.
func (e *Engine) TransportFailure(ch *routing.Channel, at *Attempt, err error) *Failure {
	detail := MaskKeys(err.Error(), ch.Keys)
	var ne net.Error
	if errors.Is(at.Cause(), ErrTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		return &Failure{Channel: true, Detail: detail, Err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream channel %q did not answer in time: retry shortly", ch.Name)}
	}
	return &Failure{Channel: true, Detail: detail, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
		"the upstream channel %q could not be reached", ch.Name)}
}

// StreamFailure classifies a stream that broke before its first event
// reached the client, or after (then only err's words are used).
func (e *Engine) StreamFailure(ch *routing.Channel, at *Attempt, streamIdle time.Duration, maxEvent int, err error) *Failure {
	switch cause := at.Cause(); {
	case errors.Is(cause, ErrStreamIdle):
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q sent nothing for %s (its stream_idle_timeout)", ch.Name, streamIdle)}
	case errors.Is(err, adapters.ErrEventTooLarge):
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q sent a stream event larger than the gateway's limit of %d bytes (max_stream_event)", ch.Name, maxEvent)}
	}
	var ue *adapters.Error
	if errors.As(err, &ue) {
		return e.UpstreamFailure(ch, ue, nil)
	}
	msg := "the upstream stream broke off before its end"
	if errors.Is(err, io.EOF) {
		msg = "the upstream stream ended before any event"
	}
	return &Failure{Channel: true, Detail: MaskKeys(err.Error(), ch.Keys), Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%s (channel %q)", msg, ch.Name)}
}
