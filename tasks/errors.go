package tasks

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
)

// ClientError is err, from talking to ch, as a neutral error fit for the
// client: an upstream's own error with the channel's keys masked, or, for
// a failure to talk to the upstream at all, what happened without
// addresses (err itself goes to the log).
func (e *Engine) ClientError(err error, ch *Channel) *adapters.Error {
	var ue *adapters.Error
	if !errors.As(err, &ue) {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI, "the upstream did not answer within the channel's timeout")
		}
		if errors.Is(err, bodies.ErrTooLarge) {
			return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream's answer is larger than the channel's max_response_body")
		}
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream could not be reached")
	}
	ce := *ue
	if ce.Status == 0 {
		ce.Status = http.StatusBadGateway
	}
	ce.Message = engine.MaskKeys(ce.Message, ch.Keys)
	return &ce
}

// NotFound is the answer for a task that does not exist and for one of
// someone else's alike, so an id's owner is never revealed.
func NotFound() *adapters.Error {
	return &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "task_not_found",
		Message: "no such task for this account: check the task_id that POST " + SubmitPath + " returned"}
}
