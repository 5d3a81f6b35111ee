package caddymodule

import (
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
)

// writeError answers in the dialect's error shape (see engine.WriteError).
func writeError(w http.ResponseWriter, d adapters.Dialect, e *adapters.Error) error {
	return engine.WriteError(w, d, e)
}
