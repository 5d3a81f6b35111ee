package caddymodule

import (
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
)

// asError turns any error into a neutral one.
func asError(err error) *adapters.Error { return engine.AsError(err) }

// writeError answers in the dialect's error shape (see engine.WriteError).
func writeError(w http.ResponseWriter, d adapters.Dialect, e *adapters.Error) error {
	return engine.WriteError(w, d, e)
}
