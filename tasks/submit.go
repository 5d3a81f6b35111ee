package tasks

import (
	"context"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// SubmitRequest is one decoded submit, as the handler hands it over.
type SubmitRequest struct {
	Identity   *keys.Identity
	Submission *Submission
	RequestID  string
	// Start is when the request came in (its usage row's time).
	Start time.Time
	// Header is the answer's header: a rate-limit refusal sets its
	// Retry-After there. May be nil.
	Header http.Header
	// Log is the handler's logger, which the submit's lines name.
	Log *zap.Logger
}

// quotaShortfall ends the refusal of a reservation the quota does not
// cover (see engine.AdmissionError).
const quotaShortfall = "task (it may cost up to %s): top up your account, ask for a shorter duration, or ask for a key with a higher limit"

// Submit starts a task: plan, admit (rate limits and reservation, through
// the gate every endpoint passes), store, send over the plan's channels.
// It returns the stored task, or the error to answer with; a refusal's
// usage row is already written. A client that hangs up (ctx ending) does
// not stop the send: the vendor may have the job already, and the task is
// the client's to look up.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (*store.Task, *adapters.Error) {
	tr := tracing.Begin(ctx, 0)
	task, ae := e.submit(ctx, req, tr)
	if tr != nil {
		e.traceSubmit(tr, req, task, ae)
	}
	return task, ae
}

func (e *Engine) submit(ctx context.Context, req SubmitRequest, tr *tracing.Request) (*store.Task, *adapters.Error) {
	id, sub, model := req.Identity, req.Submission, req.Submission.Req.Model
	// the engine's failure lines name the handler's logger
	eng := *e.deps.Engine
	if req.Log != nil {
		eng.Log = req.Log
	}
	log := eng.Log
	refuse := func(ae *adapters.Error) (*store.Task, *adapters.Error) {
		// every request past authentication gets a usage row, refused ones too
		eng.Rows.WriteUnadmitted(&store.UsageLog{CreatedAt: req.Start, UserID: id.User.ID, TokenID: id.Token.ID,
			Model: model, Endpoint: SubmitPath, Status: ae.Status, Error: ae.Message,
			LatencyMS: time.Since(req.Start).Milliseconds(), RequestID: req.RequestID, TraceID: tr.TraceID()})
		return nil, ae
	}
	plan, ae := e.plan(id, sub)
	if ae != nil {
		return refuse(ae)
	}
	price, _ := eng.Prices.Get(model)
	amount := price.TaskReservation(int64(sub.Req.Duration))
	// No usage-queue slot: a task's row is written with the task, in the
	// store's transaction, not through the queue.
	// Model: a plan that covers the model pays for the task as for any
	// request (its windows, not the balance)
	ad, err := eng.Gate.Admit(time.Now(), billing.Ask{User: id.User, Token: id.Token, Rate: billing.RateRequest,
		Reserve: billing.Reserve(amount), Model: model})
	if err != nil {
		eng.Gate.Settle(time.Now(), ad, 0, 0)
		return refuse(engine.AdmissionError(err, req.Header, quotaShortfall))
	}

	if req.Header != nil {
		engine.BudgetHeaders(req.Header, ad.Hold.Windows)
	}
	// The reservation moves to the store with the task, in one transaction:
	// it outlives this request, this configuration and this process. The
	// windows count the whole of it from now until the task settles; the
	// store keeps their ids and who pays with the task.
	stored := time.Now()
	task := &store.Task{ID: NewID(), UserID: id.User.ID, TokenID: id.Token.ID, Model: model,
		Reserved: amount, Duration: sub.Req.Duration, RequestID: req.RequestID,
		LeaseOwner: e.submitter, LeaseUntil: stored.Add(e.submitLease(plan)),
		Windows: ad.Hold.Windows.IDsAt(stored), Plan: ad.Hold.Windows.PaidBy()}
	if !price.Free {
		task.PriceTask, task.PriceSecond = price.Task, price.VideoSecond
	}
	if err := e.deps.Store.CreateTask(ctx, task); err != nil {
		eng.Gate.Settle(time.Now(), ad, 0, 0)
		log.Error("storing a task", zap.Error(err))
		return refuse(adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot record tasks right now; try again shortly"))
	}
	eng.Gate.Ledger.Debited(ad.Hold, stored)
	ad.Hold = billing.Hold{}
	if tr != nil {
		e.keepTrace(ctx, tr, task.ID, log)
	}
	// a task holds its key's rate limits (max_parallel) while it is
	// submitted, not while it runs; it is billed by the task, not by tokens
	defer func() { eng.Gate.Settle(time.Now(), ad, 0, 0) }()

	ctx = context.WithoutCancel(ctx)
	var upstreamID, answeredBy string
	var answered int // the last failed channel's upstream status, 0 for no answer
	n := 0
	ch, f := eng.RunDetached(model, plan, engine.AttemptFunc(func(rc *routing.Channel) *engine.Failure {
		var f *engine.Failure
		n++
		upstreamID, answered, f = e.attempt(ctx, &eng, rc, model, &sub.Req, tr, n)
		if f == nil || !f.Channel {
			answeredBy = rc.Name
		}
		return f
	}))
	task.Channel = answeredBy
	if f == nil {
		task.UpstreamID, task.Status = upstreamID, adapters.TaskNotStarted
		task.NextPollAt = time.Now().Add(e.cfg.PollInterval)
		if err := e.deps.Store.UpdateTask(ctx, task); err != nil {
			// the submit lease runs out and the poller settles the task
			// as one whose outcome is unknown
			log.Error("recording a submitted task", zap.String("task_id", task.ID), zap.String("channel", ch.Name), zap.String("upstream_id", upstreamID), zap.Error(err))
		}
		return task, nil
	}
	last := f.Err
	if f.Channel {
		last = channelFailure(f.Err, answered)
	}
	task.Status, task.Error = adapters.TaskFailed, last.Message
	row := &store.UsageLog{CreatedAt: req.Start, Model: model, Channel: task.Channel, Endpoint: SubmitPath,
		Status: last.Status, Error: last.Message, LatencyMS: time.Since(req.Start).Milliseconds(), RequestID: task.RequestID,
		TraceID: tr.TraceID()}
	if settled, err := e.deps.Store.FinishTask(ctx, task, row); err != nil {
		log.Error("refunding a refused task", zap.String("task_id", task.ID), zap.Error(err))
	} else if settled {
		eng.Gate.TaskSettled(task.UserID, task.TokenID, task.Plan, task.Windows, task.Reserved)
	}
	return nil, last
}

// submitLease is how long a submit holds its new task: as long as every
// channel of its plan may take to answer in turn, and then some. Until it
// runs out no poller takes the task up, so none fails a task whose vendor
// may still accept it.
func (e *Engine) submitLease(plan []*routing.Channel) time.Duration {
	var d time.Duration
	for _, ch := range plan {
		if up := e.deps.Engine.Upstreams.Get(ch.Name); up != nil {
			d += up.Bounds.Timeout
		}
	}
	return d + e.cfg.Lease
}

// plan resolves the model to the channels that can run the task as asked,
// refusing what no channel can: a model that is not a task model, a
// callback for a polling-only family, a metadata field the gateway or the
// vendor's adapter owns.
func (e *Engine) plan(id *keys.Identity, sub *Submission) ([]*routing.Channel, *adapters.Error) {
	model := sub.Req.Model
	eng := e.deps.Engine
	if e := engine.ModelAllowed(eng.Gate.Models(), id.Token, model); e != nil {
		return nil, e
	}
	if !eng.Channels.Has(model) {
		return nil, engine.UnknownModel(model)
	}
	price, ok := eng.Prices.Get(model)
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
	if slices.Contains(sub.MetaKeys, "model") {
		return nil, adapters.BadRequest("'%smetadata.model' is set by the gateway, not the client: name the model with the top-level 'model' (the one that is billed)", prefix)
	}
	// Channels that cannot run the task as asked are left out before the
	// plan's health order and retry budget, so they spend no attempt.
	tp := eng.PlanTask(model, sub.Req.CallbackURL != "", sub.MetaKeys)
	plan, polling := tp.Channels, tp.PollingOnly
	if tp.Owned != "" {
		return nil, adapters.BadRequest("'%smetadata.%s' is set by the gateway for this model, not by the client: use the task endpoint's own fields (prompt, image, duration, aspect_ratio, size, negative_prompt, seed) instead", prefix, tp.Owned)
	}
	if len(plan) == 0 && polling {
		return nil, adapters.BadRequest("the model %s is polling-only: it takes no callback_url. Drop '%smetadata.callback_url' and poll GET %s{task_id} instead", model, prefix, StatusPrefix)
	}
	if len(plan) == 0 {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "not_a_task_model",
			Message: "the model " + model + " is not a task model: no channel serving it runs submitted tasks. Call its own endpoint (/v1/...) instead"}
	}
	return plan, nil
}
