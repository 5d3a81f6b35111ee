package tasks

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// finish settles a task at its terminal state: a finished task is charged
// its real seconds at the prices fixed at submit (never more than was
// reserved), a failed one nothing; the reservation comes back in the same
// transaction, exactly once however many instances try.
func (e *Engine) finish(ctx context.Context, t *store.Task, st *adapters.TaskState) {
	t.Status = st.Status
	t.Progress = st.Progress
	t.Cost = 0
	status := http.StatusOK
	if st.Status == adapters.TaskFinished {
		t.Progress = 100
		t.Error = ""
		files := st.Files
		if files == nil {
			files = []adapters.TaskFile{}
		}
		b, _ := json.Marshal(files)
		t.Files = string(b)
		t.Cost = t.Reserved
		if seconds := st.Seconds; seconds > 0 || t.Duration > 0 {
			if seconds <= 0 {
				seconds = float64(t.Duration)
			}
			t.Cost = min(billing.TaskCost(t.PriceTask, t.PriceSecond, seconds), t.Reserved)
		}
	} else {
		t.Error = st.Error
		if t.Error == "" {
			t.Error = "the vendor reported the task failed without giving a reason"
		}
		status = http.StatusBadGateway
	}
	now := time.Now()
	row := &store.UsageLog{CreatedAt: now, Model: t.Model, Channel: t.Channel, Endpoint: SubmitPath,
		Status: status, Error: t.Error, LatencyMS: now.Sub(t.CreatedAt).Milliseconds(),
		RequestID: t.RequestID, UpstreamRequestID: t.UpstreamID}
	if tracing.Enabled() {
		if tt, err := e.deps.Store.TaskTrace(ctx, t.ID); err == nil {
			row.TraceID = tt.TraceID // the submit's: the row links to its trace
		}
	}
	settled, err := e.deps.Store.FinishTask(ctx, t, row)
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Warn("settling a task; trying again at its next poll", zap.String("task_id", t.ID), zap.Error(err))
			t.LeaseOwner = e.owner
			e.later(ctx, t, e.cfg.PollInterval)
		}
		return
	}
	if settled {
		e.deps.Engine.Gate.TaskSettled(t.UserID, t.TokenID, t.Plan, t.Windows, t.Reserved-t.Cost)
		e.taskCost(t)
		e.deps.Log.Info("task settled", zap.String("task_id", t.ID), zap.String("status", t.Status), zap.Int64("cost", t.Cost), zap.Int64("refunded", t.Reserved-t.Cost))
	}
}

// unknownOutcomeError is the error of a task whose submit never answered.
const unknownOutcomeError = "the gateway stopped while the vendor was taking this task, so whether the vendor accepted it is not known. " +
	"It was charged what was reserved for it, not refunded: the vendor may have made it (and called your callback_url). " +
	"Ask the gateway's operator, with this task_id, to check it with the vendor"

// unknownOutcome settles a task whose submit died before the vendor
// answered (a crash, a kill, a grace period cut short). The vendor may have
// accepted it and bills the operator for it, and may deliver it to the
// client's callback; it may as well never have seen it. The gateway cannot
// tell, so it guesses neither way for free: the task fails, charged its
// reservation, and the log names it so the operator can check it with
// the vendor and credit the user back if it was never made.
func (e *Engine) unknownOutcome(ctx context.Context, t *store.Task) {
	t.Status, t.Progress, t.Error, t.Cost = adapters.TaskFailed, 0, unknownOutcomeError, t.Reserved
	now := time.Now()
	row := &store.UsageLog{CreatedAt: now, Model: t.Model, Channel: t.Channel, Endpoint: SubmitPath,
		Status: http.StatusBadGateway, Error: t.Error, LatencyMS: now.Sub(t.CreatedAt).Milliseconds(), RequestID: t.RequestID}
	settled, err := e.deps.Store.FinishTask(ctx, t, row)
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Warn("settling a task whose submit never answered; trying again at its next poll", zap.String("task_id", t.ID), zap.Error(err))
			t.LeaseOwner = e.owner
			e.later(ctx, t, e.cfg.PollInterval)
		}
		return
	}
	if settled {
		e.taskCost(t)
		e.deps.Log.Error("a task's submit never answered: charged its reservation, not refunded; check it with the vendor",
			zap.String("task_id", t.ID), zap.String("model", t.Model), zap.Int64("user_id", t.UserID),
			zap.String("request_id", t.RequestID), zap.Time("submitted", t.CreatedAt), zap.Int64("cost", t.Cost))
	}
}

// taskCost tells the metrics what a settled task cost.
func (e *Engine) taskCost(t *store.Task) {
	if e.deps.TaskCost != nil {
		e.deps.TaskCost(t.Model, t.UserID, t.Cost)
	}
}
