package engine

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// Failure is one attempt's failure: what the client is told if no other
// channel answers, and whether it was the channel's fault (the engine then
// fails over and counts it toward the channel's ejection).
type Failure struct {
	Err *adapters.Error
	// Channel: the channel's fault (its key, its account, an outage), not
	// the request's; another channel may serve the request
	Channel bool
	// RetryAfter is an upstream 429's Retry-After: the channel is set
	// aside for that long at once
	RetryAfter time.Duration
	// Detail is what the upstream said or the transport's error, keys
	// masked, for the throttled failure log line
	Detail string
	// UpstreamStatus is the status the upstream answered with, 0 when it
	// did not answer: the failure log's status, since the client's is in
	// the access log and the operator fixes what the upstream said
	UpstreamStatus int
}

// removedChannel is the failure of a channel removed (made at runtime and
// deleted or changed) between a request's plan and its attempt: the next
// channel of the plan is tried.
func removedChannel(ch *routing.Channel) *Failure {
	return &Failure{Err: adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "channel %q was removed while the request waited for it", ch.Name), Channel: true}
}

// maxFailureSummary bounds what a channel's record keeps of its last failure.
const maxFailureSummary = 512

// summary is the failure as the operators' channels page shows it: what
// the client was told and, keys masked, what the upstream said.
func (f *Failure) summary() string {
	s := f.Err.Message
	if f.Detail != "" && f.Detail != s {
		s += ": " + f.Detail
	}
	return Truncate(s, maxFailureSummary)
}

// logStatus is the status a failure log line names: the upstream's, or
// the client's when the upstream did not answer.
func (f *Failure) logStatus() int {
	if f.UpstreamStatus != 0 {
		return f.UpstreamStatus
	}
	return f.Err.Status
}

// ClientClosed is the failure of a request whose client has gone.
func ClientClosed() *Failure { return &Failure{Err: adapters.ClientClosed()} }

// Classify is the one fault classifier: it tells, from an upstream's error
// answer (a non-2xx status, or an error as a stream's first event), whose
// fault it was and what the client is told. The client gets the gateway's
// own words; only a refusal of the request itself (400, 413, 422) keeps the
// upstream's explanation, keys masked, since the client must fix its
// request. Credentials, the channel's bill (402), a redirect (3xx: a wrong
// base_url) and an unknown model or path upstream (404: a wrong model list)
// are the operator's to fix, so they fail over like an outage does. header
// may be nil (a stream's error event has none).
func Classify(channel string, keys []string, e *adapters.Error, header http.Header) *Failure {
	f := classify(channel, keys, e, header)
	f.UpstreamStatus = e.Status
	return f
}

func classify(channel string, keys []string, e *adapters.Error, header http.Header) *Failure {
	st := e.Status
	switch {
	case e.Fault == adapters.FaultChannel || st == http.StatusUnauthorized || st == http.StatusForbidden ||
		st == http.StatusPaymentRequired || st == http.StatusProxyAuthRequired:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream refused channel %q's credentials or account (HTTP %d): the gateway's operator must fix its key or its billing", channel, st)}
	case st >= 300 && st < 400:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q answered with a redirect (HTTP %d), which the gateway does not follow: the gateway's operator must fix its base_url", channel, st)}
	case st == http.StatusNotFound:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q does not know this model or endpoint (HTTP 404): the gateway's operator must fix its model list", channel)}
	case st == http.StatusTooManyRequests:
		f := &Failure{Channel: true, Err: &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "upstream_rate_limited",
			Message: "the upstream is rate limiting this model's channels: retry shortly"}}
		f.RetryAfter = RetryAfter(header, time.Now())
		return f
	case st == http.StatusRequestTimeout || st == http.StatusGatewayTimeout:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q timed out (HTTP %d): retry shortly", channel, st)}
	case st == http.StatusServiceUnavailable || st == 529 || e.Type == adapters.ErrOverloaded:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded,
			"the upstream of channel %q is overloaded (HTTP %d): retry shortly", channel, st)}
	case st >= 500 || st < 400:
		return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q failed (HTTP %d): retry shortly", channel, st)}
	case st == http.StatusBadRequest || st == http.StatusRequestEntityTooLarge || st == http.StatusUnprocessableEntity:
		return &Failure{Err: &adapters.Error{Status: st, Type: e.Type, Code: e.Code, Param: e.Param,
			Message: "the upstream model refused the request: " + MaskKeys(e.Message, keys)}}
	}
	return &Failure{Err: adapters.Errorf(st, adapters.ErrorTypeForStatus(st),
		"the upstream model refused the request (HTTP %d)", st)}
}

// upstreamDetail is the log's account of an upstream error, keys masked.
func upstreamDetail(e *adapters.Error, keys []string) string {
	return strings.TrimSpace(fmt.Sprintf("HTTP %d %s %s: %s", e.Status, e.Type, e.Code, MaskKeys(e.Message, keys)))
}

// RetryAfter reads a Retry-After header, in seconds or as an HTTP date; at
// most a day.
func RetryAfter(h http.Header, now time.Time) time.Duration {
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

// MaskKeys hides a channel's keys in upstream text bound for the log, and
// cuts it to 1000 bytes.
func MaskKeys(s string, keys []string) string {
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
