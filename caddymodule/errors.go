package caddymodule

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
)

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

// writeError answers in the dialect's error shape (see engine.WriteError).
func writeError(w http.ResponseWriter, d adapters.Dialect, e *adapters.Error) error {
	return engine.WriteError(w, d, e)
}
