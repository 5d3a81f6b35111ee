package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-model-gateway/gateway/internal/serverside"
)

// requestIDHeader carries a request's id in, and always out.
const requestIDHeader = "X-Request-Id"

// requestIDVar is the request variable holding the id, so it is also the
// placeholder {http.vars.gateway.request_id}.
const requestIDVar = "gateway.request_id"

// assignRequestID gives the request its id: the caller's X-Request-Id when
// it is well formed, else a new one. The id goes back in the response
// header, into the access log (setAccessLogFields) and, through the
// request variable, onto the usage row.
func assignRequestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if !serverside.WellFormedRequestID(id) {
		id = serverside.NewRequestID()
		r.Header.Set(requestIDHeader, id)
	}
	w.Header().Set(requestIDHeader, id)
	caddyhttp.SetVar(r.Context(), requestIDVar, id)
	return id
}

// requestIDOf is the id assignRequestID gave the request.
func requestIDOf(r *http.Request) string {
	id, _ := caddyhttp.GetVar(r.Context(), requestIDVar).(string)
	return id
}
