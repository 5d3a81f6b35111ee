package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddy.RegisterModule(Account{})
}

// Account serves the account and admin API under /api/user/ and
// /api/admin/; other requests pass to the next handler. Callers are known
// by the login session's cookie or by a gateway key (Bearer). Every answer,
// refusals included, is JSON, errors in OpenAI's shape. The policy is the
// account package's; this decodes, calls it and answers.
type Account struct {
	app  *App
	log  *zap.Logger
	mux  *http.ServeMux
	gate *account.Gate
}

// CaddyModule returns the Caddy module information.
func (Account) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_account",
		New: func() caddy.Module { return new(Account) },
	}
}

// Provision finds the gateway app and routes the API.
func (h *Account) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	cfg := account.GateConfig{Registration: app.Registration, InvitationReward: app.InvitationReward}
	if c := app.AccountRateLimit; c != nil {
		cfg.Attempts, cfg.Window = c.Attempts, time.Duration(c.Window)
	}
	if c := app.RegistrationRateLimit; c != nil {
		cfg.Signups, cfg.SignupWindow = c.Attempts, time.Duration(c.Window)
	}
	h.gate = account.NewGate(app.db.store, cfg)

	m := http.NewServeMux()
	m.HandleFunc("POST /api/user/login", h.wrap(h.login))
	m.HandleFunc("POST /api/user/register", h.wrap(h.register))
	m.HandleFunc("POST /api/user/logout", h.wrap(h.logout))
	m.HandleFunc("POST /api/user/logout_all", h.user(h.logoutAll))
	m.HandleFunc("POST /api/user/password", h.user(h.changePassword))
	m.HandleFunc("GET /api/user/self", h.user(h.self))
	m.HandleFunc("POST /api/user/topup", h.user(h.topup))
	m.HandleFunc("POST /api/user/aff_transfer", h.user(h.affTransfer))
	m.HandleFunc("GET /api/user/models", h.user(h.models))
	m.HandleFunc("GET /api/user/tokens", h.user(h.listTokens))
	m.HandleFunc("POST /api/user/tokens", h.user(h.createToken))
	m.HandleFunc("PATCH /api/user/tokens/{id}", h.user(h.updateToken))
	m.HandleFunc("DELETE /api/user/tokens/{id}", h.user(h.deleteToken))
	m.HandleFunc("GET /api/user/usage", h.user(h.usage))
	m.HandleFunc("GET /api/user/usage/daily", h.user(h.dailySpend))
	m.HandleFunc("GET /api/admin/users", h.admin(h.listUsers))
	m.HandleFunc("POST /api/admin/users", h.admin(h.createUser))
	m.HandleFunc("PATCH /api/admin/users/{id}", h.admin(h.updateUser))
	m.HandleFunc("PATCH /api/admin/tokens/{id}", h.admin(h.updateTokenLimits))
	m.HandleFunc("GET /api/admin/codes", h.admin(h.listCodes))
	m.HandleFunc("POST /api/admin/codes", h.admin(h.createCodes))
	m.HandleFunc("PATCH /api/admin/codes/{id}", h.admin(h.updateCode))
	m.HandleFunc("GET /api/admin/usage", h.admin(h.adminUsage))
	m.HandleFunc("/api/user/", h.wrap(h.noRoute))
	m.HandleFunc("/api/admin/", h.wrap(h.noRoute))
	h.mux = m
	return nil
}

func (h *Account) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !strings.HasPrefix(r.URL.Path, "/api/user/") && !strings.HasPrefix(r.URL.Path, "/api/admin/") {
		return next.ServeHTTP(w, r)
	}
	// the API is for the console's scripts and for programs, never cached
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
	return nil
}

// noRoute tells a wrong method from a wrong path.
func (h *Account) noRoute(w http.ResponseWriter, r *http.Request) (any, error) {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" && !strings.HasSuffix(pattern, "/api/user/") && !strings.HasSuffix(pattern, "/api/admin/") {
			return nil, &apiError{status: http.StatusMethodNotAllowed, typ: errInvalidRequest, code: "method_not_allowed",
				msg: fmt.Sprintf("%s %s is not supported: use %s", r.Method, r.URL.Path, m), allowedMethod: m}
		}
	}
	return nil, &apiError{status: http.StatusNotFound, typ: errNotFound, code: "unknown_endpoint",
		msg: fmt.Sprintf("there is no endpoint %s %s: see the gateway's README for the account API", r.Method, r.URL.Path)}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) (any, error)

// caller is who an account request acts for.
type caller struct {
	user *store.User
}

type userHandlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) (any, error)

// wrap writes a handler's answer or error as JSON.
func (h *Account) wrap(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(w, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// user authenticates the caller first.
func (h *Account) user(fn userHandlerFunc) http.HandlerFunc {
	return h.wrap(func(w http.ResponseWriter, r *http.Request) (any, error) {
		c, err := h.authenticate(w, r)
		if err != nil {
			return nil, err
		}
		return fn(w, r, c)
	})
}

// admin authenticates the caller and requires an administrator.
func (h *Account) admin(fn userHandlerFunc) http.HandlerFunc {
	return h.user(func(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
		if !account.IsAdmin(c.user) {
			return nil, errNotAdmin
		}
		return fn(w, r, c)
	})
}

// authenticate finds the caller by key or by session. A key wins when both
// are sent. With the cookie, a request that changes state must come from
// the console's own origin with a JSON body.
func (h *Account) authenticate(w http.ResponseWriter, r *http.Request) (*caller, error) {
	if key := bearerKey(r); key != "" {
		id, err := h.app.db.keys.Lookup(r.Context(), key)
		if errors.Is(err, keys.ErrUnknownKey) {
			return nil, &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "invalid_api_key",
				msg: "the API key is not valid: check that you copied the whole sk-... key the gateway issued"}
		}
		if err != nil {
			return nil, err
		}
		if e := checkIdentity(id); e != nil {
			return nil, &apiError{status: e.Status, typ: e.Type, code: e.Code, msg: e.Message}
		}
		// the cached user may be seconds old; account answers show balances
		u, err := h.app.db.store.UserByID(r.Context(), id.User.ID)
		if err != nil {
			return nil, err
		}
		return &caller{user: u}, nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, ok := sessionCookieOf(r); ok && (!sameOrigin(r) || !jsonBody(r)) {
			return nil, errCrossSite
		}
	}
	u, err := h.app.sessionUser(w, r)
	if errors.Is(err, errNoSession) {
		return nil, errNeedLogin
	}
	if errors.Is(err, account.ErrSessionExpired) {
		return nil, &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "session_expired", msg: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	return &caller{user: u}, nil
}

func bearerKey(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Account)(nil)
	_ caddy.Provisioner           = (*Account)(nil)
)
