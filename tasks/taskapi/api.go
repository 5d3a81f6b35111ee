// Package taskapi is the HTTP API of the task engine: the task endpoints
// (POST /api/generate/submit, GET /api/generate/status/{task_id}, GET
// /api/generate/file/{task_id}/{n}) and the Files and Batch APIs
// (/v1/files, /v1/batches, /v1/messages/batches). It reads a request
// within the gateway's bounds, calls the tasks.Engine and answers, errors
// in the caller's dialect.
//
// It must not import Caddy: what only the server in front knows (the
// request's id, whom its body is counted against, how a refused body is
// answered, the database's hold across a reload) comes in as functions,
// so the Caddy layer wires it (caddymodule's gateway_tasks and
// gateway_relay) and tests run without Caddy.
package taskapi

import (
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/internal/serverside"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// UsageRows takes the usage row of a request refused before admission
// (billing.Writer).
type UsageRows interface {
	WriteUnadmitted(row *store.UsageLog)
}

// Config is what the API works with.
type Config struct {
	// Tasks keeps the files and runs the tasks and batches.
	Tasks *tasks.Engine
	// Engine refuses a submit no body could pass before it is read
	// (engine.Precheck).
	Engine *engine.Engine
	// Usage takes the rows of refused submits.
	Usage UsageRows
	// Bodies is the process's budget of request bodies in flight, shared
	// per key and address with every model request.
	Bodies *bodies.Budget
	// MaxRequestBody bounds a submit's body; MaxElements any one JSON
	// array or object in a body (adapters.PreScan).
	MaxRequestBody int64
	MaxElements    int
	// Fetch bounds the images a submit gives by URL.
	Fetch *adapters.FetchPolicy
	// TaskDialect shapes the task endpoints' errors.
	TaskDialect adapters.Dialect

	// Request is the log, the database's hold, the request's id and
	// whom its body is counted against in Bodies.
	serverside.Request
	// BodyBusy words a refusal of Bodies (bodies.Busy), setting
	// Retry-After in the header.
	BodyBusy func(err error, h http.Header) *adapters.Error
	// BodyReadError words a failure to read a request body.
	BodyReadError func(*http.Request, error) *adapters.Error
	// RefuseUnread answers a request whose body is left unread, so a
	// client still sending gets the answer rather than a reset.
	RefuseUnread func(w http.ResponseWriter, r *http.Request, answer func() error) error
}

// API serves the task and batch endpoints; build it with New.
type API struct {
	Config
}

// New returns the API for cfg; the functions left nil do the plainest
// thing (no hold, no request id, the body counted against the key alone,
// a refusal answered at once).
func New(cfg Config) *API {
	cfg.Request.Defaults()
	if cfg.BodyBusy == nil {
		cfg.BodyBusy = func(error, http.Header) *adapters.Error {
			return adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded, "the gateway is reading too many large requests at once: retry shortly")
		}
	}
	if cfg.BodyReadError == nil {
		cfg.BodyReadError = func(*http.Request, error) *adapters.Error {
			return adapters.BadRequest("the request body could not be read")
		}
	}
	if cfg.RefuseUnread == nil {
		cfg.RefuseUnread = func(_ http.ResponseWriter, _ *http.Request, answer func() error) error { return answer() }
	}
	return &API{Config: cfg}
}
