package caddymodule

import (
	"net"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// Defaults of a channel's bounds (see ChannelConfig).
const (
	defaultDialTimeout           = 10 * time.Second
	defaultResponseHeaderTimeout = 60 * time.Second
	defaultStreamIdleTimeout     = 120 * time.Second
	defaultTimeout               = 10 * time.Minute
	defaultMaxResponseBody       = 64 << 20 // image answers are large
	defaultMaxStreamEvent        = 32 << 20
)

// HealthConfig is `health { ... }`: when a failing channel is set aside.
type HealthConfig struct {
	// ConsecutiveFailures ejects a channel after this many failures in a
	// row (connect errors, timeouts, 5xx, 408, 429, refused credentials).
	// Default 5.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// BaseEjection times the number of its ejections is how long an
	// ejected channel is skipped. Default 30s.
	BaseEjection caddy.Duration `json:"base_ejection,omitempty"`
	// MaxEjection caps an ejection, also one set by a Retry-After. Default 5m.
	MaxEjection caddy.Duration `json:"max_ejection,omitempty"`
}

func (hc *HealthConfig) policy() routing.HealthPolicy {
	p := routing.DefaultHealthPolicy
	if hc == nil {
		return p
	}
	if hc.ConsecutiveFailures > 0 {
		p.ConsecutiveFailures = hc.ConsecutiveFailures
	}
	if hc.BaseEjection > 0 {
		p.BaseEjection = time.Duration(hc.BaseEjection)
	}
	if hc.MaxEjection > 0 {
		p.MaxEjection = time.Duration(hc.MaxEjection)
	}
	return p
}

// bounds are the channel's limits in force, defaults filled in.
func (cc *ChannelConfig) bounds() engine.Bounds {
	b := engine.Bounds{
		Dial: defaultDialTimeout, ResponseHeader: defaultResponseHeaderTimeout,
		StreamIdle: defaultStreamIdleTimeout, Timeout: defaultTimeout,
		MaxResponseBody: defaultMaxResponseBody, MaxStreamEvent: defaultMaxStreamEvent,
	}
	if cc.DialTimeout > 0 {
		b.Dial = time.Duration(cc.DialTimeout)
	}
	if cc.ResponseHeaderTimeout > 0 {
		b.ResponseHeader = time.Duration(cc.ResponseHeaderTimeout)
	}
	if cc.StreamIdleTimeout > 0 {
		b.StreamIdle = time.Duration(cc.StreamIdleTimeout)
	}
	if cc.Timeout > 0 {
		b.Timeout = time.Duration(cc.Timeout)
	}
	if cc.MaxResponseBody > 0 {
		b.MaxResponseBody = cc.MaxResponseBody
	}
	if cc.MaxStreamEvent > 0 {
		b.MaxStreamEvent = int(min(cc.MaxStreamEvent, 1<<30))
	}
	return b
}

// transportKey is what makes two channels' transports differ; channels
// that agree share one connection pool.
type transportKey struct{ dial, responseHeader time.Duration }

// clientFor returns the HTTP client for a channel's timeouts. No client
// follows a redirect: the key would travel to whatever host it names.
func (a *App) clientFor(b engine.Bounds) *http.Client {
	k := transportKey{b.Dial, b.ResponseHeader}
	if c, ok := a.transports[k]; ok {
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
	a.transports[k] = c
	return c
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// imageURLs counts the images a chat request gives by URL, which an
// upstream that takes only inline images makes the gateway fetch.
func imageURLs(req *adapters.Request) int {
	if req.Chat == nil {
		return 0
	}
	n := 0
	count := func(parts []adapters.Part) {
		for _, p := range parts {
			if p.Type == adapters.PartImage && p.Image != nil && p.Image.URL != "" {
				n++
			}
		}
	}
	for _, m := range req.Chat.Messages {
		count(m.Parts)
		for _, p := range m.Parts {
			if p.ToolResult != nil {
				count(p.ToolResult.Content)
			}
		}
	}
	return n
}
