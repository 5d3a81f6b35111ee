package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// failure is one attempt's failure: what the client is told if no other
// channel answers, and whether it was the channel's fault (the relay then
// fails over and counts it toward the channel's ejection).
type failure struct {
	err        *adapters.Error
	channel    bool
	retryAfter time.Duration // an upstream 429's Retry-After
	// detail is what the upstream said or the transport's error, keys
	// masked, for the log line logFailure writes
	detail string
}

// failureLogInterval is how often, at most, a failing channel is logged:
// during an outage every request fails, and a line a second with a count
// says what a line a request would.
const failureLogInterval = time.Second

// What a channel's failed attempt leads to, as its log line says.
const (
	failedTryingNext = "channel failed; trying the next channel"
	failedNoNext     = "channel failed; no other channel to try"
	failedMidAnswer  = "channel failed mid-answer; the answer ends with an error"
)

// failover is the log line of a failed attempt before any answer, when
// next says whether another channel is tried.
func failover(next bool) string {
	if next {
		return failedTryingNext
	}
	return failedNoNext
}

// logFailure logs a channel's failed attempt, once a failureLogInterval
// per channel, with the number of failures the line stands for; msg says
// what the failure led to.
func (a *App) logFailure(log *zap.Logger, ch *routing.Channel, f *failure, msg string) {
	ok, n := a.failureLog.Allow(ch.Name, time.Now())
	if !ok {
		return
	}
	if ce := log.Check(zap.WarnLevel, msg); ce != nil {
		ce.Write(zap.String("channel", ch.Name), zap.Int("status", f.err.Status), zap.String("error", f.err.Message),
			zap.String("upstream", f.detail), zap.Int("failures", n))
	}
}

// upstreamFailure classifies an upstream's error answer (a non-2xx status,
// or an error as a stream's first event). The client gets the gateway's
// own words; the upstream's text, which can quote organisation ids, limits
// or parts of the channel's key, goes to the log only, keys masked. Only a
// refusal of the request itself (400, 413, 422) keeps the upstream's
// explanation, since the client must fix its request.
func (h *Relay) upstreamFailure(ch *routing.Channel, e *adapters.Error, header http.Header) *failure {
	f := classifyUpstreamError(ch, e, header)
	if f.channel {
		// the failover loop logs it, throttled: an outage is every request
		f.detail = strings.TrimSpace(fmt.Sprintf("HTTP %d %s %s: %s", e.Status, e.Type, e.Code, maskKeys(e.Message, ch.Keys)))
	} else if ce := h.log.Check(zap.WarnLevel, "upstream answered with an error"); ce != nil {
		ce.Write(zap.String("channel", ch.Name), zap.Int("status", e.Status), zap.String("type", string(e.Type)),
			zap.String("code", e.Code), zap.String("upstream_message", maskKeys(e.Message, ch.Keys)))
	}
	return f
}

func classifyUpstreamError(ch *routing.Channel, e *adapters.Error, header http.Header) *failure {
	st := e.Status
	switch {
	case e.Fault == adapters.FaultChannel || st == http.StatusUnauthorized || st == http.StatusForbidden ||
		st == http.StatusPaymentRequired || st == http.StatusProxyAuthRequired:
		return &failure{channel: true, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream refused channel %q's credentials or account (HTTP %d): the gateway's operator must fix its key or its billing", ch.Name, st)}
	case st >= 300 && st < 400:
		return &failure{channel: true, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q answered with a redirect (HTTP %d), which the gateway does not follow: the gateway's operator must fix its base_url", ch.Name, st)}
	case st == http.StatusNotFound:
		return &failure{channel: true, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q does not know this model or endpoint (HTTP 404): the gateway's operator must fix its model list", ch.Name)}
	case st == http.StatusTooManyRequests:
		f := &failure{channel: true, err: &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "upstream_rate_limited",
			Message: "the upstream is rate limiting this model's channels: retry shortly"}}
		f.retryAfter = retryAfter(header, time.Now())
		return f
	case st == http.StatusRequestTimeout || st == http.StatusGatewayTimeout:
		return &failure{channel: true, err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q timed out (HTTP %d): retry shortly", ch.Name, st)}
	case st == http.StatusServiceUnavailable || st == 529 || e.Type == adapters.ErrOverloaded:
		return &failure{channel: true, err: adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded,
			"the upstream of channel %q is overloaded (HTTP %d): retry shortly", ch.Name, st)}
	case st >= 500 || st < 400:
		return &failure{channel: true, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q failed (HTTP %d): retry shortly", ch.Name, st)}
	case st == http.StatusBadRequest || st == http.StatusRequestEntityTooLarge || st == http.StatusUnprocessableEntity:
		return &failure{err: &adapters.Error{Status: st, Type: e.Type, Code: e.Code, Param: e.Param,
			Message: "the upstream model refused the request: " + maskKeys(e.Message, ch.Keys)}}
	}
	return &failure{err: adapters.Errorf(st, adapters.ErrorTypeForStatus(st),
		"the upstream model refused the request (HTTP %d)", st)}
}

// transportFailure classifies an attempt that got no answer at all.
func (h *Relay) transportFailure(ch *routing.Channel, at *attempt, err error) *failure {
	detail := maskKeys(err.Error(), ch.Keys)
	var ne net.Error
	if errors.Is(at.cause(), errTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		return &failure{channel: true, detail: detail, err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream channel %q did not answer in time: retry shortly", ch.Name)}
	}
	return &failure{channel: true, detail: detail, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
		"the upstream channel %q could not be reached", ch.Name)}
}

// streamFailure classifies a stream that broke before its first event
// reached the client, or after (then only err's words are used).
func (h *Relay) streamFailure(ch *routing.Channel, at *attempt, b channelBounds, err error) *failure {
	switch cause := at.cause(); {
	case errors.Is(cause, errStreamIdle):
		return &failure{channel: true, err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q sent nothing for %s (its stream_idle_timeout)", ch.Name, b.streamIdle)}
	case errors.Is(err, adapters.ErrEventTooLarge):
		return &failure{channel: true, err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q sent a stream event larger than the gateway's limit of %d bytes (max_stream_event)", ch.Name, b.maxStreamEvent)}
	}
	var e *adapters.Error
	if errors.As(err, &e) {
		return h.upstreamFailure(ch, e, nil)
	}
	msg := "the upstream stream broke off before its end"
	if errors.Is(err, io.EOF) {
		msg = "the upstream stream ended before any event"
	}
	return &failure{channel: true, detail: maskKeys(err.Error(), ch.Keys), err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%s (channel %q)", msg, ch.Name)}
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// maskKeys hides the channel's keys in upstream text bound for the log.
func maskKeys(s string, keys []string) string {
	for _, k := range keys {
		if len(k) >= 8 && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, "[key]")
		}
	}
	if len(s) > 1000 {
		s = s[:1000] + "..."
	}
	return s
}
