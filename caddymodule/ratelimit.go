package caddymodule

import "github.com/caddyserver/caddy/v2"

// RateLimitConfig is a number of attempts allowed per window; the
// account package's Gate counts them.
type RateLimitConfig struct {
	Attempts int            `json:"attempts,omitempty"`
	Window   caddy.Duration `json:"window,omitempty"`
}
