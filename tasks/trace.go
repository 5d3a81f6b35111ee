package tasks

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// A task's trace: the submit's server span carries the task and a client
// span per channel tried; each poll is a span of its own trace, linked to
// the submit's span, whose ids are stored with the task.

// keepTrace stores the submit's trace with the task, for its polls.
func (e *Engine) keepTrace(ctx context.Context, tr *tracing.Request, id string, log *zap.Logger) {
	sc := tr.SpanContext()
	if err := e.deps.Store.SetTaskTrace(ctx, id, store.TaskTrace{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String()}); err != nil {
		// the task runs on; its polls are traced without a link
		log.Warn("storing a task's trace", zap.String("task_id", id), zap.Error(err))
	}
}

// traceSubmit annotates the submit's server span with its outcome.
func (e *Engine) traceSubmit(tr *tracing.Request, req SubmitRequest, task *store.Task, ae *adapters.Error) {
	s := tracing.Summary{Operation: "submit_task", Model: req.Submission.Req.Model, RequestID: req.RequestID, Status: http.StatusOK,
		UserID: req.Identity.User.ID, TokenID: req.Identity.Token.ID}
	if task != nil {
		tr.Task(task.ID)
		s.Channel = task.Channel
		if ch := e.deps.Engine.Channels.Channel(task.Channel); ch != nil {
			s.Provider = ch.Type
		}
	}
	if ae != nil {
		s.Status, s.Error = ae.Status, ae.Message
	}
	tr.Finish(s)
}

// startPoll starts a poll's span on ch when tracing is enabled, linked to
// the submit's span stored with the task; nil otherwise.
func (e *Engine) startPoll(ctx context.Context, t *store.Task, ch *Channel) *tracing.Poll {
	if !tracing.Enabled() {
		return nil
	}
	st, err := e.deps.Store.TaskTrace(ctx, t.ID)
	if err != nil {
		st = store.TaskTrace{} // traced without a link
	}
	return tracing.StartPoll(t.ID, t.Model, t.Channel, ch.Type, st.TraceID, st.SpanID)
}

// tracedDoer sends a poll's requests with the poll's traceparent.
type tracedDoer struct {
	do   adapters.Doer
	poll *tracing.Poll
}

func (d tracedDoer) Do(r *http.Request) (*http.Response, error) {
	d.poll.Upstream(r)
	return d.do.Do(r)
}
