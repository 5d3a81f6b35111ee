package engine

import (
	"net"
	"net/http"
	"time"
)

// DefaultBounds are a channel's bounds where its configuration sets none.
var DefaultBounds = Bounds{
	Dial:            10 * time.Second,
	ResponseHeader:  60 * time.Second,
	StreamIdle:      120 * time.Second,
	Timeout:         10 * time.Minute,
	MaxResponseBody: 64 << 20, // image answers are large
	MaxStreamEvent:  32 << 20,
}

// Transports are the channels' HTTP clients by the timeouts that make
// their transports differ: channels that agree share one connection pool.
// A map, not safe for concurrent use: its owner builds channels one at a
// time.
type Transports map[transportKey]*http.Client

type transportKey struct{ dial, responseHeader time.Duration }

// Client returns the HTTP client for a channel's bounds. No client
// follows a redirect: the key would travel to whatever host it names.
func (t Transports) Client(b Bounds) *http.Client {
	k := transportKey{b.Dial, b.ResponseHeader}
	if c, ok := t[k]; ok {
		return c
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: b.Dial, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   min(b.Dial, 10*time.Second),
		ResponseHeaderTimeout: b.ResponseHeader,
		ExpectContinueTimeout: time.Second,
		// small buffers: thousands of streams stay open at once, and the
		// SSE reader above the connection buffers again anyway
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  2 << 10,
	}
	c := &http.Client{Transport: tr, CheckRedirect: noRedirects}
	t[k] = c
	return c
}

// noRedirects keeps a redirect as the answer: a channel's key must not
// follow it elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
