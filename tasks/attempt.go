package tasks

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// attempt sends the task to one channel of the plan: the vendor's id for
// it, or the failure as the request engine classifies it, with the
// upstream's status when it answered with an error (0 otherwise).
func (e *Engine) attempt(ctx context.Context, eng *engine.Engine, rc *routing.Channel, model string, req *adapters.TaskRequest, tr *tracing.Request, n int) (string, int, *engine.Failure) {
	if tr == nil {
		return e.try(ctx, eng, rc, model, req, nil)
	}
	up := rc.UpstreamModel(model)
	tr.StartAttempt(tracing.Attempt{Operation: "submit_task", Model: up, Channel: rc.Name, Provider: rc.Type, Number: n}, "", nil, nil)
	upstreamID, answered, f := e.try(ctx, eng, rc, model, req, tr)
	if f != nil {
		tr.AttemptFailed(tracing.Failure{Status: f.Err.Status, UpstreamStatus: f.UpstreamStatus, Type: string(f.Err.Type),
			ChannelFault: f.Channel, Message: f.Err.Message})
	} else {
		tr.EndAttempt()
	}
	return upstreamID, answered, f
}

// try is one attempt; tr (may be nil) is told of each upstream request.
func (e *Engine) try(ctx context.Context, eng *engine.Engine, rc *routing.Channel, model string, req *adapters.TaskRequest, tr *tracing.Request) (string, int, *engine.Failure) {
	ch := e.withUpstream(rc)
	tp := ch.Provider.(adapters.TaskProvider) // the plan keeps task families only
	at := engine.NewAttempt(ctx, ch.Timeout, 0, false)
	defer at.End()
	x := &exchange{do: ch.doer(), trace: tr}
	upstreamID, err := tp.SubmitTask(at.Ctx, x, ch.upstream(model), req)
	if err == nil && upstreamID != "" {
		return upstreamID, 0, nil
	}
	var ue *adapters.Error
	switch {
	case err == nil:
		return "", 0, &engine.Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q accepted the task but gave no id for it", rc.Name)}
	case errors.As(err, &ue) && !x.sent && ue.Status >= 400 && ue.Status < 500 && ue.Fault != adapters.FaultChannel:
		// the adapter refused the request before sending it, in its own
		// words, as the relay answers a request its adapter cannot build
		ce := *ue
		ce.Message = engine.MaskKeys(ce.Message, rc.Keys)
		return "", 0, &engine.Failure{Err: &ce}
	case errors.As(err, &ue):
		return "", ue.Status, eng.UpstreamFailure(rc, ue, x.header)
	case x.err != nil:
		return "", 0, eng.TransportFailure(rc, at, err)
	}
	// an answer the adapter could not use: too large, unreadable
	return "", 0, &engine.Failure{Channel: true, Detail: engine.MaskKeys(err.Error(), rc.Keys),
		Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream of channel %q gave an answer the gateway could not read", rc.Name)}
}

// channelFailure is the task endpoint's answer when no channel took the
// task, each failing on its own account: a timeout as the engine words it
// (504), anything else a 502 naming the upstream's status. The engine
// classifies (whose fault, Retry-After, ejection, metrics); this wording
// is the task endpoint's own, which its clients rely on: a task submit
// has no overloaded or rate-limited answer of its own to retry by.
func channelFailure(e *adapters.Error, answered int) *adapters.Error {
	switch {
	case e.Status == http.StatusGatewayTimeout:
		return e
	case answered != 0:
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream could not take the task (it answered HTTP %d); try again shortly", answered)
	}
	return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%s", e.Message)
}
