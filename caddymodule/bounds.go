package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
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
	if hc == nil {
		return routing.DefaultHealthPolicy
	}
	return routing.HealthPolicy{ConsecutiveFailures: hc.ConsecutiveFailures, BaseEjection: time.Duration(hc.BaseEjection),
		MaxEjection: time.Duration(hc.MaxEjection)}.WithDefaults()
}

// bounds are the channel's bounds as configured; engine.BuildChannel
// fills those left zero with the defaults.
func (cc *ChannelConfig) bounds() engine.Bounds {
	return engine.Bounds{Dial: time.Duration(cc.DialTimeout), ResponseHeader: time.Duration(cc.ResponseHeaderTimeout),
		StreamIdle: time.Duration(cc.StreamIdleTimeout), Timeout: time.Duration(cc.Timeout),
		MaxResponseBody: cc.MaxResponseBody, MaxStreamEvent: int(min(cc.MaxStreamEvent, 1<<30))}
}
