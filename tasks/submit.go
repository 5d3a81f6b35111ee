package tasks

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// SubmitRequest is one decoded submit, as the handler hands it over.
type SubmitRequest struct {
	Identity   *keys.Identity
	Submission *Submission
	RequestID  string
	// Start is when the request came in (its usage row's time).
	Start time.Time
	// AdmitRate admits the request under its key's rate limits once the
	// task is known to be runnable; done ends the hold. Nil: no limits.
	AdmitRate func() (done func(), e *adapters.Error)
	// Log is the handler's logger, which the submit's lines name.
	Log *zap.Logger
}

// Submit starts a task: plan, admit, reserve in the store, send over the
// plan's channels. It returns the stored task, or the error to answer
// with; a refusal's usage row is already written. A client that hangs up
// (ctx ending) does not stop the send: the vendor may have the job
// already, and the task is the client's to look up.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (*store.Task, *adapters.Error) {
	id, sub, model := req.Identity, req.Submission, req.Submission.Req.Model
	log := req.Log
	if log == nil {
		log = e.deps.Log
	}
	refuse := func(ae *adapters.Error) (*store.Task, *adapters.Error) {
		// every request past authentication gets a usage row, refused ones too
		e.deps.Usage.WriteUnadmitted(&store.UsageLog{CreatedAt: req.Start, UserID: id.User.ID, TokenID: id.Token.ID,
			Model: model, Endpoint: SubmitPath, Status: ae.Status, Error: ae.Message,
			LatencyMS: time.Since(req.Start).Milliseconds(), RequestID: req.RequestID})
		return nil, ae
	}
	plan, ae := e.plan(id, sub)
	if ae != nil {
		return refuse(ae)
	}
	if req.AdmitRate != nil {
		done, ae := req.AdmitRate()
		if ae != nil {
			return refuse(ae)
		}
		// a task holds its key's rate limits (max_parallel) while it is
		// submitted, not while it runs
		defer done()
	}
	price := e.deps.Prices[model]
	amount := price.TaskReservation(int64(sub.Req.Duration))
	hold, ae := e.reserve(id, amount)
	if ae != nil {
		return refuse(ae)
	}

	// The reservation moves to the store with the task, in one transaction:
	// it outlives this request, this configuration and this process.
	task := &store.Task{ID: NewID(), UserID: id.User.ID, TokenID: id.Token.ID, Model: model,
		Reserved: amount, Duration: sub.Req.Duration, RequestID: req.RequestID,
		LeaseOwner: e.submitter, LeaseUntil: time.Now().Add(e.submitLease(plan))}
	if !price.Free {
		task.PriceTask, task.PriceSecond = price.Task, price.VideoSecond
	}
	if err := e.deps.Store.CreateTask(ctx, task); err != nil {
		e.deps.Ledger.Settle(hold, 0)
		log.Error("storing a task", zap.Error(err))
		return refuse(adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot record tasks right now; try again shortly"))
	}
	e.deps.Ledger.Debited(hold)

	ctx = context.WithoutCancel(ctx)
	out := e.deps.Failover(ctx, log, plan, func(ctx context.Context, ch *Channel) (string, error) {
		sctx, cancel := context.WithTimeout(ctx, ch.Timeout)
		defer cancel()
		upstreamID, err := ch.Provider.(adapters.TaskProvider).SubmitTask(sctx, ch.doer(), ch.upstream(model), &sub.Req)
		if err == nil && upstreamID == "" {
			err = adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream accepted the task but gave no id for it")
		}
		return upstreamID, err
	})
	if out.Channel != nil {
		task.Channel = out.Channel.Name
	}
	if out.Err == nil {
		task.UpstreamID, task.Status = out.UpstreamID, adapters.TaskNotStarted
		task.NextPollAt = time.Now().Add(e.cfg.PollInterval)
		if err := e.deps.Store.UpdateTask(ctx, task); err != nil {
			// the submit lease runs out and the poller settles the task
			// as one whose outcome is unknown
			log.Error("recording a submitted task", zap.String("task_id", task.ID), zap.String("upstream_id", out.UpstreamID), zap.Error(err))
		}
		return task, nil
	}
	last := out.Err
	task.Status, task.Error = adapters.TaskFailed, last.Message
	row := &store.UsageLog{CreatedAt: req.Start, Model: model, Channel: task.Channel, Endpoint: SubmitPath,
		Status: last.Status, Error: last.Message, LatencyMS: time.Since(req.Start).Milliseconds(), RequestID: task.RequestID}
	if settled, err := e.deps.Store.FinishTask(ctx, task, row); err != nil {
		log.Error("refunding a refused task", zap.String("task_id", task.ID), zap.Error(err))
	} else if settled {
		e.deps.Ledger.Returned(task.UserID, task.TokenID, task.Reserved)
	}
	return nil, last
}

// reserve admits amount against the user's and the key's quota.
func (e *Engine) reserve(id *keys.Identity, amount int64) (billing.Hold, *adapters.Error) {
	hold, ok := e.deps.Ledger.Admit(id.User, id.Token, amount)
	if ok {
		return hold, nil
	}
	if avail, _ := e.deps.Ledger.Available(id.User.ID); avail <= 0 {
		return hold, quotaError("your quota is used up: top up your account and try again")
	}
	return hold, quotaError("your remaining quota does not cover this task (it may cost up to " + formatUnits(amount) +
		"): top up your account, ask for a shorter duration, or ask for a key with a higher limit")
}

// submitLease is how long a submit holds its new task: as long as every
// channel of its plan may take to answer in turn, and then some. Until it
// runs out no poller takes the task up, so none fails a task whose vendor
// may still accept it.
func (e *Engine) submitLease(plan []*Channel) time.Duration {
	var d time.Duration
	for _, ch := range plan {
		d += ch.Timeout
	}
	return d + e.cfg.Lease
}

// plan resolves the model to the channels that can run the task as asked,
// refusing what no channel can: a model that is not a task model, a
// callback for a polling-only family, a metadata field the gateway or the
// vendor's adapter owns.
func (e *Engine) plan(id *keys.Identity, sub *Submission) ([]*Channel, *adapters.Error) {
	model := sub.Req.Model
	if len(id.Token.Models) > 0 && !slices.Contains(id.Token.Models, model) {
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_allowed",
			Message: "this API key may not use model " + model + "; it may use: " + strings.Join(id.Token.Models, ", ")}
	}
	if !e.deps.Channels.Has(model) {
		return nil, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
			Message: "the model " + model + " does not exist on this gateway: GET /v1/models lists the models your key may use"}
	}
	price, ok := e.deps.Prices[model]
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
	var plan []*Channel
	polling := false
	for _, ch := range e.deps.Channels.Plan(model) {
		tp, ok := ch.Provider.(adapters.TaskProvider)
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
		plan = append(plan, ch)
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
