package caddymodule

import (
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
)

// serveModels lists the models this key may use, or the one asked for, in
// the caller's dialect. The dialect decodes which model a GET names.
func (h *Relay) serveModels(w http.ResponseWriter, r *http.Request, rt route, id *keys.Identity) error {
	req, err := rt.dialect.DecodeRequest(rt.op, nil, r)
	if err != nil {
		return writeError(w, rt.dialect, asError(err))
	}
	var list []adapters.ModelInfo
	for _, m := range h.app.channels.Models() {
		if !h.app.gate.Models().Allows(id.Token.Models, m) {
			continue
		}
		list = append(list, adapters.ModelInfo{ID: m, OwnedBy: h.app.channels.Owner(m), Created: 1700000000})
	}
	w.Header().Set("Content-Type", "application/json")
	if rt.op == adapters.OpListModels {
		_, _ = w.Write(rt.dialect.EncodeModels(list)) // a write error is the client gone
		return nil
	}
	for _, m := range list {
		if m.ID == req.Model {
			_, _ = w.Write(rt.dialect.EncodeModel(m))
			return nil
		}
	}
	return writeError(w, rt.dialect, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
		Message: "the model " + req.Model + " does not exist on this gateway or your key may not use it"})
}
