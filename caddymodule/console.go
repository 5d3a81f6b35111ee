package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-model-gateway/gateway/web"
)

func init() {
	caddy.RegisterModule(Console{})
}

// Console serves the web console (web.Console: the pages and their assets
// at / and under /console/). Other paths pass to the next handler.
type Console struct {
	console *web.Console
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_console",
		New: func() caddy.Module { return new(Console) },
	}
}

// Provision finds the gateway app and parses the pages.
func (h *Console) Provision(ctx caddy.Context) error {
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.console, err = web.NewConsole(app.Registration)
	return err
}

func (h *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !web.Handles(r.URL.Path) {
		return next.ServeHTTP(w, r)
	}
	err := h.console.Serve(w, r)
	// a status alone is Caddy's to answer (handle_errors)
	var se *web.StatusError
	if errors.As(err, &se) {
		return caddyhttp.Error(se.Status, se.Err)
	}
	return err
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddy.Provisioner           = (*Console)(nil)
)
