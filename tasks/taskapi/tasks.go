package taskapi

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

func (h *API) fail(w http.ResponseWriter, e *adapters.Error) error {
	return engine.WriteError(w, h.TaskDialect, e)
}

// ServeTask answers a task endpoint's request (tasks.IsPath) for the
// caller id (nil: no key was checked): submit, status or file.
func (h *API) ServeTask(w http.ResponseWriter, r *http.Request, id *keys.Identity) error {
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
func (h *API) submit(w http.ResponseWriter, r *http.Request, id *keys.Identity) error {
	defer h.EnterDatabase()()
	start := time.Now()
	refuse := func(e *adapters.Error) error {
		// every request past authentication gets a usage row, refused ones too
		h.Usage.WriteUnadmitted(&store.UsageLog{CreatedAt: start, UserID: id.User.ID, TokenID: id.Token.ID,
			Endpoint: tasks.SubmitPath, Status: e.Status, Error: e.Message,
			LatencyMS: time.Since(start).Milliseconds(), RequestID: h.RequestID(r)})
		return h.answerError(w, e)
	}

	refuseUnread := func(e *adapters.Error) error {
		return h.RefuseUnread(w, r, func() error { return refuse(e) })
	}
	// what no body could change is refused before the body is read
	if e := h.Engine.Precheck(&engine.Exchange{W: w, R: r, ID: id, Req: &adapters.Request{}}); e != nil {
		return refuseUnread(e)
	}
	body, held, err := h.Bodies.ReadRequest(r, h.MaxRequestBody, h.BodyOwner(r, id))
	h.Bodies.Give(held)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return refuseUnread(adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than the gateway's limit of %d bytes: give the image by URL rather than inline", h.MaxRequestBody))
	case bodies.Busy(err):
		return refuseUnread(h.BodyBusy(err, w.Header()))
	case err != nil:
		return refuse(h.BodyReadError(r, err))
	}
	if e := adapters.PreScan(body, h.MaxElements); e != nil {
		return refuse(e)
	}
	sub, e := tasks.ParseSubmission(body)
	if e != nil {
		return refuse(e)
	}
	if e := engine.CheckModelName(sub.Req.Model); e != nil {
		return refuse(e)
	}
	ctx := adapters.WithImageFetcher(r.Context(), h.Fetch.NewFetcher())
	task, e := h.Tasks.Submit(ctx, tasks.SubmitRequest{Identity: id, Submission: sub, RequestID: h.RequestID(r), Start: start,
		Header: w.Header(), Log: h.Log})
	if e != nil {
		return h.answerError(w, e)
	}
	return writeTaskData(w, tasks.SubmittedData(task))
}

// answerError answers e, unless the client has gone.
func (h *API) answerError(w http.ResponseWriter, e *adapters.Error) error {
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
func (h *API) status(w http.ResponseWriter, r *http.Request, id *keys.Identity, taskID string) error {
	t, e := h.Tasks.Status(r.Context(), h.Log, id.User.ID, taskID)
	if e != nil {
		return h.fail(w, e)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return writeTaskData(w, tasks.StatusData(t, h.Tasks.ClientFiles(t, scheme+"://"+r.Host)))
}

// file streams a finished task's file from the upstream, with the
// channel's key, to the task's owner.
func (h *API) file(w http.ResponseWriter, r *http.Request, id *keys.Identity, rest string) error {
	taskID, n, ok := strings.Cut(rest, "/")
	if !ok {
		return h.fail(w, tasks.NotFound())
	}
	resp, limit, e := h.Tasks.OpenFile(r.Context(), h.Log, id.User.ID, taskID, n)
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
