package caddymodule

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/accesslog"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/keys/keyauth"
	"github.com/caddy-model-gateway/gateway/tracing"
)

func init() {
	caddy.RegisterModule(Auth{})
}

// Auth authenticates a gateway key wherever the caller's dialect puts it,
// and puts the identity in the request context for the handlers after it.
// Failures are answered in the caller's dialect.
type Auth struct {
	app       *App
	auth      *keyauth.Authenticator
	log       *zap.Logger
	accessLog *zap.Logger // Caddy's http.log.access, see internal/accesslog
}

// CaddyModule returns the Caddy module information.
func (Auth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_auth",
		New: func() caddy.Module { return new(Auth) },
	}
}

// Provision finds the gateway app and builds the key checks on its
// database (keys/keyauth).
func (h *Auth) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	h.accessLog = ctx.Logger(new(caddyhttp.App)).Named("log.access")
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.auth = keyauth.New(keyauth.Config{
		Dialects:      app.dialects,
		Keys:          app.db.Keys,
		Sessions:      app.webSessions(),
		ClientSecrets: app.db.Store,
		Failures:      app.db.AuthFailures,
		ClientAddress: clientAddress,
		Log:           h.log,
	})
	return nil
}

func gatewayApp(ctx caddy.Context) (*App, error) {
	a, err := ctx.App("gateway")
	if err != nil {
		return nil, err
	}
	return a.(*App), nil
}

type ctxKey int

// authKey holds the *authenticated of a request gateway_auth let through:
// one context value for both, since every request carries them.
const authKey ctxKey = 0

// authenticated is who made a request and the route it was matched to.
type authenticated struct {
	id *keys.Identity
	rt route
}

// route is the dialect and operation a request was matched to.
type route struct {
	dialect adapters.Dialect
	op      adapters.Operation
}

// identityFrom returns the authenticated identity, if any.
func identityFrom(ctx context.Context) *keys.Identity {
	if a, ok := ctx.Value(authKey).(*authenticated); ok {
		return a.id
	}
	return nil
}

// routeOf finds the dialect that claims the request, falling back to the
// last one (OpenAI's) for paths nobody claims.
func (a *App) routeOf(r *http.Request) route {
	if a, ok := r.Context().Value(authKey).(*authenticated); ok {
		return a.rt
	}
	for _, d := range a.dialects {
		if op, ok := d.Route(r); ok {
			return route{dialect: d, op: op}
		}
	}
	if isTaskPath(r.URL.Path) {
		return route{dialect: a.taskDialect, op: adapters.OpUnknown}
	}
	return route{dialect: a.dialects[len(a.dialects)-1], op: adapters.OpUnknown}
}

func (h *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// the request is in the database from its first gateway handler on:
	// its key is looked up in it, and a reload that drops the database
	// waits for it (gatewaydb.Database.Destruct) rather than closing the store between
	// its authentication and the relay's count (CI: the -race gateway,
	// stalled there past the drain's quiet, queued a served request's row
	// after the store had closed; it went to the journal, in neither
	// database). One that arrives once the store is closing is refused,
	// to be retried on the new configuration, rather than served unbilled.
	db := h.app.db
	if !db.TryEnter() {
		w.Header().Set("Retry-After", "1")
		return h.refuse(w, r, h.app.routeOf(r).dialect, &adapters.Error{Status: http.StatusServiceUnavailable, Type: adapters.ErrOverloaded,
			Code: "configuration_replaced", Message: "the gateway's configuration was replaced as this request arrived: retry it"})
	}
	defer db.Leave()
	reqID := assignRequestID(w, r)
	// the access log's fields are set once, by serveAs with the identity
	// or here for a request refused before it has one
	identified := false
	defer func() {
		if !identified {
			setAccessLogFields(r, reqID, nil)
		}
	}()
	rt := h.app.routeOf(r)
	// the key is stripped from the request before any later handler or
	// log line sees it (keyauth.TakeKey)
	footprint := accesslog.Footprint(r)
	key := h.auth.TakeKey(r, rt.dialect)
	if accesslog.Footprint(r) != footprint {
		// Caddy's access log copied the request before it was stripped
		var line *accesslog.Line
		if w, line = accesslog.TakeOver(w, r, h.accessLog, reqID); line != nil {
			defer line.Write()
		}
	}
	r, id, e := h.auth.Identify(w, r, rt.dialect, rt.op, key)
	if e != nil {
		return h.refuse(w, r, rt.dialect, e)
	}
	identified = true
	return h.serveAs(w, r, next, rt, id, reqID)
}

// serveAs passes the request on as id, which keyauth let through.
func (h *Auth) serveAs(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, rt route, id *keys.Identity, reqID string) error {
	setAccessLogFields(r, reqID, id)

	ctx := context.WithValue(r.Context(), authKey, &authenticated{id: id, rt: rt})
	r = r.WithContext(ctx)
	caddyhttp.SetVar(ctx, "gateway.user_id", id.User.ID)
	caddyhttp.SetVar(ctx, "gateway.username", id.User.Username)
	caddyhttp.SetVar(ctx, "gateway.token_id", id.Token.ID)
	caddyhttp.SetVar(ctx, "gateway.token_name", id.Token.Name)
	return next.ServeHTTP(w, r)
}

// setAccessLogFields puts the request's id and, once its key is known, its
// identity in the access log line: request_id, gateway_user_id,
// gateway_user and gateway_token_id, written inline as one field. One
// field, set once: every ExtraLogFields.Set clears Caddy's cache of log
// handlers, an allocation each.
func setAccessLogFields(r *http.Request, reqID string, id *keys.Identity) {
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(keyauth.LogField(reqID, id))
	}
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Auth)(nil)
	_ caddy.Provisioner           = (*Auth)(nil)
)

// refuse answers a request authentication refused, the refusal on its
// trace too (a site with `tracing`). Its body is not read: the answer goes
// at once, even to a client that sends no body.
func (h *Auth) refuse(w http.ResponseWriter, r *http.Request, d adapters.Dialect, e *adapters.Error) error {
	tracing.Refused(r.Context(), e.Status, e.Message)
	return h.app.refuseUnread(w, r, func() error { return engine.WriteError(w, d, e) })
}
