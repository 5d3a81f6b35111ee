package caddymodule

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
)

// fail answers with an error before anything was relayed.
func (x *exchange) fail(e *adapters.Error) error {
	x.status, x.errMsg = e.Status, e.Message
	if e.Status == adapters.StatusClientClosed {
		return nil // nobody is listening
	}
	return writeError(x.w, x.dialect, e)
}

// asError turns any error into a neutral one.
func asError(err error) *adapters.Error {
	var e *adapters.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return adapters.ClientClosed()
	}
	return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%v", err)
}

func formatUnits(u int64) string { return engine.FormatUnits(u) }

func quotaError(msg string) *adapters.Error { return engine.QuotaError(msg) }

// writeError answers in the dialect's error shape. A 429 for quota carries
// x-should-retry: false, since the official SDKs otherwise retry a 429.
func writeError(w http.ResponseWriter, d adapters.Dialect, e *adapters.Error) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.Type == adapters.ErrInsufficientQuota || e.Status < 500 && e.Status != http.StatusTooManyRequests && e.Status != http.StatusRequestTimeout && e.Status != http.StatusConflict {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(e.Status)
	// a client that cannot be written to has gone: nothing to tell Caddy,
	// which would log the request with its headers
	_, _ = w.Write(d.EncodeError(e))
	return nil
}
