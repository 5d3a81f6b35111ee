package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

func init() {
	caddy.RegisterModule(Tasks{})
}

// Tasks serves task-style generation: POST /api/generate/submit starts a
// job on a channel whose adapter is an adapters.TaskProvider, GET
// /api/generate/status/{task_id} reports it, and GET
// /api/generate/file/{task_id}/{n} streams a finished file that only the
// channel's key can download. The gateway app's poller follows every task
// to its end. It must run after gateway_auth; other paths pass on.
type Tasks struct {
	app *App
	log *zap.Logger
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
	return nil
}

// isTaskPath reports whether a path is a task endpoint's, whose errors
// take the task shape.
func isTaskPath(p string) bool { return tasks.IsPath(p) }

func (h *Tasks) fail(w http.ResponseWriter, e *adapters.Error) error {
	return writeError(w, h.app.taskDialect, e)
}

func (h *Tasks) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !isTaskPath(r.URL.Path) {
		return next.ServeHTTP(w, r) // another handler's path
	}
	id := identityFrom(r.Context())
	if id == nil {
		return h.fail(w, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication,
			Message: "no API key was checked: put gateway_auth before gateway_tasks in the Caddyfile"})
	}
	p := r.URL.Path
	switch {
	case p == tasks.SubmitPath:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return h.fail(w, adapters.Errorf(http.StatusMethodNotAllowed, adapters.ErrInvalidRequest, "%s takes POST", tasks.SubmitPath))
		}
		return h.submit(w, r, id)
	case strings.HasPrefix(p, tasks.StatusPrefix) || strings.HasPrefix(p, tasks.FilePrefix):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			return h.fail(w, adapters.Errorf(http.StatusMethodNotAllowed, adapters.ErrInvalidRequest, "%s takes GET", p))
		}
		if strings.HasPrefix(p, tasks.StatusPrefix) {
			return h.status(w, r, id, strings.TrimPrefix(p, tasks.StatusPrefix))
		}
		return h.file(w, r, id, strings.TrimPrefix(p, tasks.FilePrefix))
	}
	return h.fail(w, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound,
		"unknown endpoint %s %s: the task endpoints are POST %s and GET %s{task_id}", r.Method, p, tasks.SubmitPath, tasks.StatusPrefix))
}

// submit is a task's start: read and decode the body, then the task
// engine admits, reserves and sends it.
func (h *Tasks) submit(w http.ResponseWriter, r *http.Request, id *keys.Identity) error {
	a := h.app
	db := a.db
	db.enter()
	defer db.leave()
	start := time.Now()
	refuse := func(e *adapters.Error) error {
		// every request past authentication gets a usage row, refused ones too
		db.writer.WriteUnadmitted(&store.UsageLog{CreatedAt: start, UserID: id.User.ID, TokenID: id.Token.ID,
			Endpoint: tasks.SubmitPath, Status: e.Status, Error: e.Message,
			LatencyMS: time.Since(start).Milliseconds(), RequestID: requestIDOf(r)})
		return h.answerError(w, e)
	}

	refuseUnread := func(e *adapters.Error) error {
		return a.refuseUnread(w, r, func() error { return refuse(e) })
	}
	// what no body could change is refused before the body is read
	if e := a.engine.Precheck(&engine.Exchange{W: w, R: r, ID: id, Req: &adapters.Request{}}); e != nil {
		return refuseUnread(e)
	}
	body, held, err := a.inflight.ReadRequest(r, a.MaxRequestBody, bodyOwner(r, id))
	a.inflight.Give(held)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return refuseUnread(adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than the gateway's limit of %d bytes: give the image by URL rather than inline", a.MaxRequestBody))
	case bodies.Busy(err):
		return refuseUnread(a.bodyBusy(err, w.Header(), false))
	case err != nil:
		return refuse(bodyReadError(r, err))
	}
	if e := adapters.PreScan(body, a.MaxElements); e != nil {
		return refuse(e)
	}
	sub, e := tasks.ParseSubmission(body)
	if e != nil {
		return refuse(e)
	}
	if e := checkModelName(sub.Req.Model); e != nil {
		return refuse(e)
	}
	ctx := adapters.WithImageFetcher(r.Context(), a.fetch.NewFetcher())
	task, e := a.tasks.Submit(ctx, tasks.SubmitRequest{Identity: id, Submission: sub, RequestID: requestIDOf(r), Start: start,
		Header: w.Header(), Log: h.log})
	if e != nil {
		return h.answerError(w, e)
	}
	return writeTaskData(w, tasks.SubmittedData(task))
}

// answerError answers e, unless the client has gone.
func (h *Tasks) answerError(w http.ResponseWriter, e *adapters.Error) error {
	if e.Status == adapters.StatusClientClosed {
		return nil
	}
	return h.fail(w, e)
}

func writeTaskData(w http.ResponseWriter, data any) error {
	b, err := tasks.DataBody(data)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// status answers with the task as the engine has it, refreshed if due.
func (h *Tasks) status(w http.ResponseWriter, r *http.Request, id *keys.Identity, taskID string) error {
	t, e := h.app.tasks.Status(r.Context(), h.log, id.User.ID, taskID)
	if e != nil {
		return h.fail(w, e)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return writeTaskData(w, tasks.StatusData(t, h.app.tasks.ClientFiles(t, scheme+"://"+r.Host)))
}

// file streams a finished task's file from the upstream, with the
// channel's key, to the task's owner.
func (h *Tasks) file(w http.ResponseWriter, r *http.Request, id *keys.Identity, rest string) error {
	taskID, n, ok := strings.Cut(rest, "/")
	if !ok {
		return h.fail(w, tasks.NotFound())
	}
	resp, limit, e := h.app.tasks.OpenFile(r.Context(), h.log, id.User.ID, taskID, n)
	if e != nil {
		return h.answerError(w, e)
	}
	defer resp.Body.Close()
	hdr := w.Header()
	for _, k := range []string{"Content-Type", "Content-Length", "Last-Modified", "ETag"} {
		if v := resp.Header.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	if hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", "application/octet-stream")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	copied, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil || copied > limit {
		// headers are out: cut the answer rather than end it as if whole
		panic(http.ErrAbortHandler)
	}
	return nil
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Tasks)(nil)
	_ caddy.Provisioner           = (*Tasks)(nil)
)
