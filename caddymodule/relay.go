package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/internal/serverside"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/keys/keyauth"
	"github.com/caddy-model-gateway/gateway/relayhttp"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddy.RegisterModule(Relay{})
}

// Relay serves every model endpoint: it decodes the caller's request,
// resolves the model to channels, reserves quota, sends the request through
// the channel's adapter, relays the answer (streams event by event), meters
// it and settles the charge (relayhttp). It must run after gateway_auth.
type Relay struct {
	app     *App
	handler *relayhttp.Handler
}

// CaddyModule returns the Caddy module information.
func (Relay) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_relay",
		New: func() caddy.Module { return new(Relay) },
	}
}

// Provision finds the gateway app.
func (h *Relay) Provision(ctx caddy.Context) error {
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.handler = app.relayHandler(ctx.Logger(), ctx.Done())
	return nil
}

func (h *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	rt := h.app.routeOf(r)
	return h.handler.Serve(w, r, rt.dialect, rt.op, identityFrom(r.Context()))
}

// relayHandler wires the model endpoints (relayhttp) to this
// configuration's engine (a copy logging to log), body budgets, task API
// and database; done ends its Realtime sessions.
func (a *App) relayHandler(log *zap.Logger, done <-chan struct{}) *relayhttp.Handler {
	e := *a.engine
	e.Log = log
	db := a.db
	return relayhttp.New(relayhttp.Config{
		Engine:             &e,
		Batches:            a.taskAPI(log),
		ClientSecrets:      db.Store,
		Bodies:             a.inflight,
		Uploads:            a.spooled,
		MaxRequestBody:     a.MaxRequestBody,
		MaxUploadSize:      a.MaxUploadSize,
		MaxElements:        a.MaxElements,
		MaxFetchedImages:   a.MaxFetchedImages,
		Fetch:              a.fetch,
		ClientSecretMaxTTL: time.Duration(a.ClientSecretMaxTTL),
		Done:               done,
		Request:            a.serverSide(log),
		ClientSecret: func(r *http.Request) *store.ClientSecret {
			return keyauth.ClientSecretFrom(r.Context())
		},
	})
}

// serverSide is what only this layer knows of a request (its id, whom
// its body is counted against, the database's hold), logging to log.
func (a *App) serverSide(log *zap.Logger) serverside.Request {
	db := a.db
	return serverside.Request{
		Log: log,
		EnterDatabase: func() func() {
			db.Enter()
			return db.Leave
		},
		RequestID: requestIDOf,
		BodyOwner: bodyOwner,
	}
}

// bodyOwner is whom a request's body is counted against: its key, and
// its client's network as Caddy determined its address.
func bodyOwner(r *http.Request, id *keys.Identity) bodies.Owner {
	return relayhttp.BodyOwner(clientAddress(r), id)
}

// refuseUnread answers a request whose body is left unread
// (relayhttp.RefuseUnread).
func (a *App) refuseUnread(w http.ResponseWriter, r *http.Request, answer func() error) error {
	return relayhttp.RefuseUnread(w, r, max(a.MaxRequestBody, a.MaxUploadSize), answer)
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Relay)(nil)
	_ caddy.Provisioner           = (*Relay)(nil)
)
