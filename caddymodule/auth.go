package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/accesslog"
	"github.com/caddy-model-gateway/gateway/keys"
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

// Provision finds the gateway app.
func (h *Auth) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	h.accessLog = ctx.Logger(new(caddyhttp.App)).Named("log.access")
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
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
	// waits for it (database.close) rather than closing the store between
	// its authentication and the relay's count (CI: the -race gateway,
	// stalled there past the drain's quiet, queued a served request's row
	// after the store had closed; it went to the journal, in neither
	// database). One that arrives once the store is closing is refused,
	// to be retried on the new configuration, rather than served unbilled.
	db := h.app.db
	if !db.tryEnter() {
		w.Header().Set("Retry-After", "1")
		return h.refuse(w, r, h.app.routeOf(r).dialect, &adapters.Error{Status: http.StatusServiceUnavailable, Type: adapters.ErrOverloaded,
			Code: "configuration_replaced", Message: "the gateway's configuration was replaced as this request arrived: retry it"})
	}
	defer db.leave()
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
	key := rt.dialect.Credential(r)
	// a key is removed wherever any dialect reads one, so it reaches no
	// later handler or log line whichever path it was sent to
	footprint, query := accesslog.Footprint(r), r.URL.RawQuery
	for _, d := range h.app.dialects {
		d.StripCredentials(r)
	}
	if r.URL.RawQuery != query {
		// the access log line shows the query as stripped, as the URL does,
		// and so does a server span Caddy named from the request's URI
		r.RequestURI = r.URL.RequestURI()
		tracing.StripSpanName(r.Context(), key, query, r.URL.RawQuery)
	}
	if accesslog.Footprint(r) != footprint {
		// Caddy's access log copied the request before it was stripped
		var line *accesslog.Line
		if w, line = accesslog.TakeOver(w, r, h.accessLog, reqID); line != nil {
			defer line.Write()
		}
	}
	if key == "" {
		// the console's playground rides on the login session instead
		if id, e := h.app.webSessions().Identity(w, r); e != nil {
			return h.refuse(w, r, rt.dialect, e)
		} else if id != nil {
			identified = true
			return h.serveAs(w, r, next, rt, id, reqID)
		}
		return h.refuse(w, r, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "missing_api_key",
			Message: "no API key was given: send your gateway key as 'Authorization: Bearer sk-...'" + credentialHint(rt.dialect)})
	}
	client := clientAddress(r)
	if h.app.db.authFailures.Peek(client, time.Now(), authFailureWindow) >= maxAuthFailures {
		w.Header().Set("Retry-After", strconv.Itoa(int(authFailureWindow.Seconds())))
		return h.refuse(w, r, rt.dialect, &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "too_many_failed_authentications",
			Message: "too many requests with an invalid API key came from your address: wait a minute, then retry with a valid key"})
	}
	var id *keys.Identity
	var err error
	if keys.IsClientSecret(key) {
		var e *adapters.Error
		if r, id, e, err = h.lookupClientSecret(r, rt, key); e != nil {
			return h.refuse(w, r, rt.dialect, e)
		}
		if errors.Is(err, keys.ErrUnknownKey) {
			h.app.db.authFailures.Count(client, time.Now(), authFailureWindow)
			return h.refuse(w, r, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "invalid_client_secret",
				Message: "the client secret is not valid or has expired: mint a new one with POST /v1/realtime/client_secrets"})
		}
	} else {
		id, err = h.app.db.keys.Lookup(r.Context(), key)
	}
	if errors.Is(err, keys.ErrUnknownKey) {
		h.app.db.authFailures.Count(client, time.Now(), authFailureWindow)
		return h.refuse(w, r, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "invalid_api_key",
			Message: "the API key is not valid: check that you copied the whole sk-... key the gateway issued"})
	}
	if err != nil {
		h.log.Error("looking up a key", zap.Error(err))
		return h.refuse(w, r, rt.dialect, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot check keys right now; try again shortly"))
	}
	identified = true
	return h.serveAs(w, r, next, rt, id, reqID)
}

// serveAs passes the request on as id, once id may make requests at all.
func (h *Auth) serveAs(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, rt route, id *keys.Identity, reqID string) error {
	if e := accountapi.CheckIdentity(id); e != nil {
		setAccessLogFields(r, reqID, nil)
		return h.refuse(w, r, rt.dialect, e)
	}
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
		extra.Set(accessLogField(reqID, id))
	}
}

func accessLogField(reqID string, id *keys.Identity) zap.Field {
	return zap.Field{Key: "gateway_request", Type: zapcore.InlineMarshalerType, Interface: &accessLogFields{reqID, id}}
}

type accessLogFields struct {
	requestID string
	id        *keys.Identity // nil: refused before the key was known
}

func (f *accessLogFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", f.requestID)
	if f.id != nil {
		enc.AddInt64("gateway_user_id", f.id.User.ID)
		enc.AddString("gateway_user", f.id.User.Username)
		enc.AddInt64("gateway_token_id", f.id.Token.ID)
	}
	return nil
}

// Failed authentications a client address may make per window before it
// is answered 429 without a key lookup.
const (
	maxAuthFailures   = 20
	authFailureWindow = time.Minute
)

func credentialHint(d adapters.Dialect) string {
	if h, ok := d.(adapters.CredentialHinter); ok {
		return " or " + h.CredentialHint()
	}
	return ""
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
	return h.app.refuseUnread(w, r, func() error { return writeError(w, d, e) })
}
