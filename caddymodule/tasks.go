package caddymodule

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
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

// newTaskID is task_ and 130 random bits: unguessable, so knowing one
// task's id tells nothing of another's.
func newTaskID() string {
	var b [17]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "task_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:26]
}

// taskChannel is a channel that can run the task, with its provider.
type taskChannel struct {
	ch   *routing.Channel
	prov adapters.TaskProvider
}

// submit is a task's start: decode, resolve, reserve in the store, send.
func (h *Tasks) submit(w http.ResponseWriter, r *http.Request, id *keys.Identity) error {
	a := h.app
	db := a.db
	db.enter()
	defer db.leave()
	start := time.Now()
	model := ""
	refuse := func(e *adapters.Error) error {
		// every request past authentication gets a usage row, refused ones too
		db.writer.WriteUnadmitted(&store.UsageLog{CreatedAt: start, UserID: id.User.ID, TokenID: id.Token.ID,
			Model: model, Endpoint: tasks.SubmitPath, Status: e.Status, Error: e.Message,
			LatencyMS: time.Since(start).Milliseconds(), RequestID: requestIDOf(r)})
		if e.Status == adapters.StatusClientClosed {
			return nil
		}
		return h.fail(w, e)
	}

	body, held, err := a.inflight.readRequestBody(r, a.MaxRequestBody)
	a.inflight.give(held)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return refuse(adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than the gateway's limit of %d bytes: give the image by URL rather than inline", a.MaxRequestBody))
	case errors.Is(err, errBodyBusy):
		w.Header().Set("Retry-After", "1")
		return refuse(adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded, "the gateway is reading too many large requests at once: retry shortly"))
	case err != nil:
		if r.Context().Err() != nil {
			return refuse(adapters.ClientClosed())
		}
		return refuse(adapters.BadRequest("the request body could not be read"))
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
	model = sub.Req.Model
	plan, e := h.taskPlan(id, sub)
	if e != nil {
		return refuse(e)
	}
	ticket, e := a.admitRate(w, id)
	if e != nil {
		return refuse(e)
	}
	// a task holds its key's rate limits (max_parallel) while it is
	// submitted, not while it runs
	defer ticket.Done(time.Now(), 0)
	price := a.prices[model]
	amount := price.TaskReservation(int64(sub.Req.Duration))
	hold, ok := db.ledger.Admit(id.User, id.Token, amount)
	if !ok {
		if avail, _ := db.ledger.Available(id.User.ID); avail <= 0 {
			return refuse(quotaError("your quota is used up: top up your account and try again"))
		}
		return refuse(quotaError("your remaining quota does not cover this task (it may cost up to " + formatUnits(amount) +
			"): top up your account, ask for a shorter duration, or ask for a key with a higher limit"))
	}

	// The reservation moves to the store with the task, in one transaction:
	// it outlives this request, this configuration and this process.
	task := &store.Task{ID: newTaskID(), UserID: id.User.ID, TokenID: id.Token.ID, Model: model,
		Reserved: amount, Duration: sub.Req.Duration, RequestID: requestIDOf(r),
		LeaseOwner: a.tasks.submitter, LeaseUntil: time.Now().Add(a.tasks.submitLease(plan))}
	if !price.Free {
		task.PriceTask, task.PriceSecond = price.Task, price.VideoSecond
	}
	if err := db.store.CreateTask(r.Context(), task); err != nil {
		db.ledger.Settle(hold, 0)
		h.log.Error("storing a task", zap.Error(err))
		return refuse(adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot record tasks right now; try again shortly"))
	}
	db.ledger.Debited(hold)

	// A client that hangs up does not stop the submit: the vendor may have
	// the job already, and the task is the client's to look up.
	ctx := adapters.WithImageFetcher(context.WithoutCancel(r.Context()), a.fetch.NewFetcher())
	var last *adapters.Error
	for i, tc := range plan {
		b := a.bounds[tc.ch.Name]
		sctx, cancel := context.WithTimeout(ctx, b.timeout)
		up := &adapters.Upstream{Channel: tc.ch.Name, BaseURL: tc.ch.BaseURL, Key: tc.ch.Key(), Model: tc.ch.UpstreamModel(model)}
		upstreamID, err := tc.prov.SubmitTask(sctx, a.tasks.doer(tc.ch.Name), up, &sub.Req)
		cancel()
		if err == nil && upstreamID == "" {
			err = adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream accepted the task but gave no id for it")
		}
		if err == nil {
			tc.ch.Succeeded()
			task.Channel, task.UpstreamID, task.Status = tc.ch.Name, upstreamID, adapters.TaskNotStarted
			task.NextPollAt = time.Now().Add(a.tasks.cfg.pollInterval())
			if err := db.store.UpdateTask(ctx, task); err != nil {
				// the submit lease runs out and the poller settles the
				// task as one whose outcome is unknown
				h.log.Error("recording a submitted task", zap.String("task_id", task.ID), zap.String("upstream_id", upstreamID), zap.Error(err))
			}
			return writeTaskData(w, map[string]any{"task_id": task.ID, "status": adapters.TaskNotStarted, "created_time": tasks.FormatTime(task.CreatedAt)})
		}
		e := maskedError(err, tc.ch)
		if !isChannelFault(e) {
			// the vendor refused the request itself: its reason, at no cost
			task.Channel, last = tc.ch.Name, e
			break
		}
		// the channel's trouble (its key, its account, an outage) is told
		// in the gateway's words; the vendor's go to the log
		last = adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream could not take the task (it answered HTTP %d); try again shortly", e.Status)
		if e.Status == http.StatusGatewayTimeout {
			last = e
		}
		if tc.ch.Failed(a.health, time.Now(), 0) {
			h.log.Warn("channel ejected", zap.String("channel", tc.ch.Name), zap.Int("status", e.Status))
		}
		a.logFailure(h.log, tc.ch, &failure{err: e, detail: maskKeys(err.Error(), tc.ch.Keys)}, failover(i+1 < len(plan)))
	}
	task.Status, task.Error = adapters.TaskFailed, last.Message
	row := &store.UsageLog{CreatedAt: start, Model: model, Channel: task.Channel, Endpoint: tasks.SubmitPath,
		Status: last.Status, Error: last.Message, LatencyMS: time.Since(start).Milliseconds(), RequestID: task.RequestID}
	if settled, err := db.store.FinishTask(ctx, task, row); err != nil {
		h.log.Error("refunding a refused task", zap.String("task_id", task.ID), zap.Error(err))
	} else if settled {
		db.ledger.Returned(task.UserID, task.TokenID, task.Reserved)
	}
	return h.fail(w, last)
}

// taskPlan resolves the model to the channels that can run the task as
// asked, refusing what no channel can: a model that is not a task model, a
// callback for a polling-only family, a metadata field the gateway or the
// vendor's adapter owns.
func (h *Tasks) taskPlan(id *keys.Identity, sub *tasks.Submission) ([]taskChannel, *adapters.Error) {
	a, model := h.app, sub.Req.Model
	if len(id.Token.Models) > 0 && !slices.Contains(id.Token.Models, model) {
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_allowed",
			Message: "this API key may not use model " + model + "; it may use: " + strings.Join(id.Token.Models, ", ")}
	}
	if !a.channels.Has(model) {
		return nil, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
			Message: "the model " + model + " does not exist on this gateway: GET /v1/models lists the models your key may use"}
	}
	price, ok := a.prices[model]
	if !ok {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "model_price_missing",
			Message: "the model " + model + " has no price configured, so it cannot be billed: the operator must add 'price " + model + " { ... }' (or mark it free) in the gateway's Caddyfile"}
	}
	// a model priced by tokens only would run its tasks for nothing
	if !price.Free && price.Task <= 0 && price.VideoSecond <= 0 {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "not_a_task_model",
			Message: "the model " + model + " is not a task model: it has no task or video_second price. Call its own endpoint (/v1/...) instead, or ask the operator to price it per task"}
	}
	prefix := sub.Prefix()
	if k := ownedByGateway(sub.MetaKeys); k != "" {
		return nil, adapters.BadRequest("'%smetadata.%s' is set by the gateway, not the client: name the model with the top-level 'model' (the one that is billed)", prefix, k)
	}
	var plan []taskChannel
	polling := false
	for _, ch := range a.channels.Plan(model, a.MaxAttempts) {
		tp, ok := a.providers[ch.Name].(adapters.TaskProvider)
		if !ok {
			continue
		}
		if sub.Req.CallbackURL != "" && !tp.CallbackCapable() {
			polling = true
			continue
		}
		if o, ok := tp.(adapters.TaskOwnedFields); ok {
			for _, k := range sub.MetaKeys {
				if slices.Contains(o.OwnedFields(), k) {
					return nil, adapters.BadRequest("'%smetadata.%s' is set by the gateway for this model, not by the client: use the task endpoint's own fields (prompt, image, duration, aspect_ratio, size, negative_prompt, seed) instead", prefix, k)
				}
			}
		}
		plan = append(plan, taskChannel{ch: ch, prov: tp})
	}
	if len(plan) == 0 && polling {
		return nil, adapters.BadRequest("the model %s is polling-only: it takes no callback_url. Drop '%smetadata.callback_url' and poll GET %s{task_id} instead", model, prefix, tasks.StatusPrefix)
	}
	if len(plan) == 0 {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "not_a_task_model",
			Message: "the model " + model + " is not a task model: no channel serving it runs submitted tasks. Call its own endpoint (/v1/...) instead"}
	}
	return plan, nil
}

// ownedByGateway is the first metadata member the gateway itself owns.
func ownedByGateway(keys []string) string {
	for _, k := range keys {
		if k == "model" {
			return k
		}
	}
	return ""
}

// isChannelFault reports whether a submit failure is the channel's (its
// key, its quota, the vendor down), so another channel may serve the task,
// rather than the vendor refusing the request itself.
func isChannelFault(e *adapters.Error) bool {
	if e.Fault == adapters.FaultChannel {
		return true
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout ||
		e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// maskedError is err as a neutral error fit for the client: an upstream's
// own error with the channel's keys masked, or, for a failure to talk to
// the upstream at all, what happened without addresses (err itself goes
// to the log).
func maskedError(err error, ch *routing.Channel) *adapters.Error {
	var ue *adapters.Error
	if !errors.As(err, &ue) {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI, "the upstream did not answer within the channel's timeout")
		}
		if errors.Is(err, errAnswerTooLarge) {
			return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%v", errAnswerTooLarge)
		}
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream could not be reached")
	}
	e := *ue
	if e.Status == 0 {
		e.Status = http.StatusBadGateway
	}
	e.Message = maskKeys(e.Message, ch.Keys)
	return &e
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

// taskNotFound is the answer for a task that does not exist and for one
// of someone else's alike, so an id's owner is never revealed.
func taskNotFound() *adapters.Error {
	return &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "task_not_found",
		Message: "no such task for this account: check the task_id that POST " + tasks.SubmitPath + " returned"}
}

// ownTask loads the caller's task, or nil with the 404 to answer.
func (h *Tasks) ownTask(ctx context.Context, id *keys.Identity, taskID string) (*store.Task, *adapters.Error) {
	if !strings.HasPrefix(taskID, "task_") || len(taskID) > 64 || strings.Contains(taskID, "/") {
		return nil, taskNotFound()
	}
	t, err := h.app.db.store.TaskByID(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.UserID != id.User.ID) {
		return nil, taskNotFound()
	}
	if err != nil {
		h.log.Error("reading a task", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot read tasks right now; try again shortly")
	}
	return t, nil
}

// status answers from the store, first refreshing from the upstream a task
// that is unfinished and was last asked about longer than a poll interval
// ago (a client told by a callback need not wait for the poller).
func (h *Tasks) status(w http.ResponseWriter, r *http.Request, id *keys.Identity, taskID string) error {
	t, e := h.ownTask(r.Context(), id, taskID)
	if e != nil {
		return h.fail(w, e)
	}
	if t.FinishedAt.IsZero() && t.UpstreamID != "" && time.Since(t.UpdatedAt) >= h.app.tasks.cfg.pollInterval() {
		if fresh := h.app.tasks.refresh(r.Context(), t.ID); fresh != nil {
			t = fresh
		}
	}
	data := map[string]any{
		"task_id":      t.ID,
		"model":        t.Model,
		"status":       t.Status,
		"progress":     t.Progress,
		"files":        h.clientFiles(r, t),
		"created_time": tasks.FormatTime(t.CreatedAt),
	}
	if !t.FinishedAt.IsZero() {
		data["finished_time"] = tasks.FormatTime(t.FinishedAt)
	}
	if t.Status == adapters.TaskFailed {
		data["error_message"] = t.Error
	}
	return writeTaskData(w, data)
}

// clientFiles are the files a client is shown: the vendor's URLs, or the
// gateway's own where downloading needs the channel's key.
func (h *Tasks) clientFiles(r *http.Request, t *store.Task) []adapters.TaskFile {
	files := taskFiles(t)
	if len(files) == 0 {
		return []adapters.TaskFile{}
	}
	if _, ok := h.app.providers[t.Channel].(adapters.TaskFetcher); !ok {
		return files
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	out := make([]adapters.TaskFile, len(files))
	for i, f := range files {
		out[i] = adapters.TaskFile{URL: fmt.Sprintf("%s://%s%s%s/%d", scheme, r.Host, tasks.FilePrefix, t.ID, i), Type: f.Type}
	}
	return out
}

func taskFiles(t *store.Task) []adapters.TaskFile {
	var files []adapters.TaskFile
	if t.Files != "" {
		_ = json.Unmarshal([]byte(t.Files), &files) // written by the poller from valid files
	}
	return files
}

// file streams a finished task's file from the upstream, with the
// channel's key, to the task's owner.
func (h *Tasks) file(w http.ResponseWriter, r *http.Request, id *keys.Identity, rest string) error {
	taskID, n, ok := strings.Cut(rest, "/")
	if !ok {
		return h.fail(w, taskNotFound())
	}
	t, e := h.ownTask(r.Context(), id, taskID)
	if e != nil {
		return h.fail(w, e)
	}
	i, err := strconv.Atoi(n)
	files := taskFiles(t)
	if err != nil || i < 0 || i >= len(files) || t.Status != adapters.TaskFinished {
		return h.fail(w, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "file_not_found",
			Message: "the task has no such file: GET " + tasks.StatusPrefix + t.ID + " lists its files once it has finished"})
	}
	a := h.app
	fetcher, ok := a.providers[t.Channel].(adapters.TaskFetcher)
	ch := a.channels.Channel(t.Channel)
	if !ok || ch == nil {
		return h.fail(w, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI,
			"the channel that ran this task is no longer configured, so its file cannot be fetched"))
	}
	b := a.bounds[ch.Name]
	ctx, cancel := context.WithTimeout(r.Context(), b.timeout)
	defer cancel()
	up := &adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(t.Model)}
	req, err := fetcher.FetchFile(ctx, up, t.UpstreamID, files[i])
	if err != nil {
		return h.fail(w, maskedError(err, ch))
	}
	resp, err := fetchFollowing(a.clients[ch.Name], req)
	if err != nil {
		if r.Context().Err() != nil {
			return nil
		}
		h.log.Warn("fetching a task's file", zap.String("task_id", t.ID), zap.String("error", maskKeys(err.Error(), ch.Keys)))
		return h.fail(w, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream did not deliver the file; try again shortly"))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		status := http.StatusBadGateway
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
			status = http.StatusGone
		}
		return h.fail(w, adapters.Errorf(status, adapters.ErrAPI, "the upstream answered %d for the file (a vendor keeps files for a limited time)", resp.StatusCode))
	}
	limit := a.tasks.cfg.maxFileSize()
	if resp.ContentLength > limit {
		return h.fail(w, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the file is larger than the gateway's limit of %d bytes (tasks max_file_size)", limit))
	}
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

// fetchFollowing sends a file request and follows up to three redirects
// (a vendor's download address often sends to signed storage), without the
// first request's headers: the key goes only where FetchFile sent it.
func fetchFollowing(c *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := c.Do(req)
	for hops := 0; err == nil && hops < 3; hops++ {
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, nil
		}
		loc, lerr := resp.Location()
		resp.Body.Close()
		if lerr != nil || (loc.Scheme != "https" && loc.Scheme != "http") {
			return nil, fmt.Errorf("the file's redirect has no usable location")
		}
		next, nerr := http.NewRequestWithContext(req.Context(), http.MethodGet, loc.String(), nil)
		if nerr != nil {
			return nil, nerr
		}
		resp, err = c.Do(next)
	}
	return resp, err
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Tasks)(nil)
	_ caddy.Provisioner           = (*Tasks)(nil)
)
