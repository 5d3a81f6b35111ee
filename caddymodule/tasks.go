package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/tasks"
	"github.com/caddy-model-gateway/gateway/tasks/taskapi"
)

func init() {
	caddy.RegisterModule(Tasks{})
}

// Tasks serves task-style generation: POST /api/generate/submit starts a
// job on a channel whose adapter is an adapters.TaskProvider, GET
// /api/generate/status/{task_id} reports it, and GET
// /api/generate/file/{task_id}/{n} streams a finished file that only the
// channel's key can download. The gateway app's poller follows every task
// to its end. It must run after gateway_auth; other paths pass on. The
// endpoints are answered by tasks/taskapi; this is its Caddy glue.
type Tasks struct {
	app *App
	log *zap.Logger
	api *taskapi.API
}

// CaddyModule returns the Caddy module information.
func (Tasks) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_tasks",
		New: func() caddy.Module { return new(Tasks) },
	}
}

// Provision finds the gateway app.
func (h *Tasks) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.api = app.taskAPI(h.log)
	return nil
}

// isTaskPath reports whether a path is a task endpoint's, whose errors
// take the task shape.
func isTaskPath(p string) bool { return tasks.IsPath(p) }

func (h *Tasks) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !isTaskPath(r.URL.Path) {
		return next.ServeHTTP(w, r) // another handler's path
	}
	return h.api.ServeTask(w, r, identityFrom(r.Context()))
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Tasks)(nil)
	_ caddy.Provisioner           = (*Tasks)(nil)
)
