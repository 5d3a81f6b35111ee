package caddymodule

// What the task endpoint (tasks.go, taskpoller.go) still names from the
// request engine, until the task engine moves out of caddymodule and calls
// engine.Run and billing.Gate itself: thin forwards, nothing else.

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/routing"
)

// failure is the task submit's record of a failed attempt, until the task
// engine runs on engine.Run: logFailure turns it into an engine.Failure.
type failure struct {
	err    *adapters.Error
	detail string
}

// failover is the log line of a failed attempt before any answer, when
// next says whether another channel is tried.
func failover(next bool) string {
	if next {
		return engine.FailedTryingNext
	}
	return engine.FailedNoNext
}

// logFailure logs a channel's failed attempt through the engine's throttle.
func (a *App) logFailure(log *zap.Logger, ch *routing.Channel, f *failure, msg string) {
	e := *a.engine
	e.Log = log
	e.LogFailure(ch, &engine.Failure{Err: f.err, Detail: f.detail, Channel: true}, msg)
}

// maskKeys hides the channel's keys in upstream text bound for the log.
func maskKeys(s string, keys []string) string { return engine.MaskKeys(s, keys) }

// inflightBodies is the process-wide budget of request bodies being read
// (see bodies.Budget), under the names the task endpoint uses until it
// moves out.
type inflightBodies struct{ *bodies.Budget }

func (b inflightBodies) readRequestBody(r *http.Request, limit int64) ([]byte, int64, error) {
	return b.ReadRequest(r, limit)
}

func (b inflightBodies) give(n int64) { b.Give(n) }

var (
	errBodyBusy     = bodies.ErrBusy
	errBodyTooLarge = bodies.ErrTooLarge
)
