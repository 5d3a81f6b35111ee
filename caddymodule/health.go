package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-model-gateway/gateway/health"
)

func init() {
	caddy.RegisterModule(Health{})
}

// Health answers health checks: "live" says the process serves HTTP;
// "ready" (the default) says whether the gateway can bill, and answers 503
// when it cannot: the store refuses writes, or the usage writer's commits
// fail or its queue is full. The answer names the store, the usage writer
// and each channel, and nothing secret: no address, key, path or user
// (package health computes it). It takes no API key; it ends the route.
type Health struct {
	// Check is "ready" (default) or "live".
	Check string `json:"check,omitempty"`

	app *App
}

// CaddyModule returns the Caddy module information.
func (Health) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_health",
		New: func() caddy.Module { return new(Health) },
	}
}

// Provision finds the gateway app.
func (h *Health) Provision(ctx caddy.Context) error {
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	return nil
}

// Validate checks the kind of check.
func (h *Health) Validate() error {
	switch h.Check {
	case "", "ready", "live":
		return nil
	}
	return fmt.Errorf("gateway_health: check must be ready or live, not %q", h.Check)
}

func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request, _ caddyhttp.Handler) error {
	if h.Check == "live" {
		return health.WriteLive(w)
	}
	return health.WriteReady(w, h.app.readiness())
}

// readiness is the gateway's: its database's store and usage writer and
// this configuration's channels.
func (a *App) readiness() health.Readiness {
	return health.Ready(&a.db.Health, a.db.Writer, a.channels.All())
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Health)(nil)
	_ caddy.Provisioner           = (*Health)(nil)
	_ caddy.Validator             = (*Health)(nil)
)
