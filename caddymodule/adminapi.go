package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves the gateway's state on Caddy's admin endpoint:
// GET /gateway/channels lists every channel with its health (ejected, until
// when, consecutive failures, ejections so far).
type adminAPI struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.gateway",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Provision finds the gateway app, if this configuration has one.
func (a *adminAPI) Provision(ctx caddy.Context) error {
	if app, err := ctx.AppIfConfigured("gateway"); err == nil {
		a.app, _ = app.(*App)
	}
	return nil
}

// Routes implements caddy.AdminRouter.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/gateway/channels", Handler: caddy.AdminHandlerFunc(a.channels)}}
}

func (a *adminAPI) channels(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed: %v", r.Method)}
	}
	if a.app == nil || a.app.channels == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no gateway is configured")}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(a.app.channelStates())
}

// Interface guards.
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
