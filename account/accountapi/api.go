// Package accountapi is the account and admin HTTP API (/api/user/...,
// /api/admin/...): login, registration, sessions carried in a cookie,
// keys, codes, usage and administrators' changes. It decodes a request,
// calls the account package's policy, and answers JSON, errors in
// OpenAI's shape.
//
// It is a plain http.Handler built from explicit dependencies and must
// not import Caddy: what only the server in front knows (the client's
// address behind trusted proxies, whether a proxy is trusted) comes in as
// functions, so the Caddy layer wires it and tests run without Caddy.
package accountapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/oidc"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/payments"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Model is one model a caller can ask for, as GET /api/user/models lists it.
type Model struct {
	ID string `json:"id"`
	// Chat says whether it chats: what the playground can run.
	Chat bool `json:"chat"`
	// Price is what the model costs, as configured, in quota units
	// (1,000,000 = 1 USD): input, output, cached_input, cache_write,
	// audio_input, audio_output, image_input per million tokens;
	// characters per million characters; request, search_unit, task,
	// audio_second, video_second and each images[].price per request,
	// search unit, task, second or image. A term left out costs nothing
	// (a cache or audio term left out costs the input or output price);
	// free says the model costs nothing at all.
	Price *billing.Price `json:"price,omitempty"`
}

// Config is what the API works with.
type Config struct {
	Store store.Store
	// Keys authenticates Bearer callers; a changed key or user's limits
	// are forgotten in it so the next request reads them again.
	Keys *keys.Cache
	// Ledger is credited what a topup, transfer or administrator adds, so
	// it is spendable at once, not after the ledger's next sync.
	Ledger *billing.Ledger
	// Gate is the account policy's rate limits and registration rules.
	Gate *account.Gate
	// Sessions are the web logins.
	Sessions *Sessions
	// Models lists the models served and priced, in order.
	Models func() []Model
	// Channels lists every channel with its health, in configuration
	// order (the admin endpoint's GET /gateway/channels); nil: none.
	Channels func() []routing.ChannelState
	// TestChannel sends a one-token chat request for model (the channel's
	// first when empty) through exactly the channel named, billed to
	// nobody; a refusal to test is an *adapters.Error. Nil: none.
	TestChannel func(ctx context.Context, channel, model string) (*ChannelTest, error)
	// ClientAddress is the client's IP as the server determined it
	// (trusted proxies included), for rate limits; nil means the host
	// of the request's RemoteAddr.
	ClientAddress func(*http.Request) string
	// SSO signs people in through an OpenID Connect provider; nil: off.
	SSO *oidc.Provider
	Log *zap.Logger
	// Budgets are the spending windows and plans; nil: none shown
	Budgets *billing.Budgets
	// Runtime is the channels made at runtime; nil: none can be made
	Runtime Runtime
	// Payments is self-serve top-up; nil: off
	Payments *payments.Service
	// RequireSecondFactorAdmins sends an administrator's session without
	// a second factor to enrol before the admin API answers it.
	RequireSecondFactorAdmins bool
	// ResetLinkLifetime is how long an administrator's password reset
	// link lasts unless the request says; 0: account.DefaultResetLinkLifetime.
	ResetLinkLifetime time.Duration
	// SiteName names the gateway in authenticator apps and passkey
	// prompts; empty: "Model Gateway".
	SiteName string
}

// Handler serves the API. Callers are known by the login session's
// cookie or by a gateway key (Bearer).
type Handler struct {
	store    store.Store
	keys     *keys.Cache
	ledger   *billing.Ledger
	gate     *account.Gate
	sessions *Sessions
	models   func() []Model
	channels func() []routing.ChannelState
	testChan func(ctx context.Context, channel, model string) (*ChannelTest, error)
	address  func(*http.Request) string
	sso      *oidc.Provider
	log      *zap.Logger
	mux      *http.ServeMux
	budgets  *billing.Budgets
	runtime  Runtime
	payments *payments.Service

	requireAdmins     bool
	resetLinkLifetime time.Duration
	siteName          string
}

// New routes the API.
func New(cfg Config) *Handler {
	h := &Handler{store: cfg.Store, keys: cfg.Keys, ledger: cfg.Ledger, gate: cfg.Gate, sessions: cfg.Sessions,
		models: cfg.Models, channels: cfg.Channels, testChan: cfg.TestChannel, address: cfg.ClientAddress, sso: cfg.SSO, log: cfg.Log, budgets: cfg.Budgets, runtime: cfg.Runtime,
		payments:      cfg.Payments,
		requireAdmins: cfg.RequireSecondFactorAdmins, resetLinkLifetime: cfg.ResetLinkLifetime, siteName: cmp.Or(cfg.SiteName, "Model Gateway")}
	if h.address == nil {
		h.address = RemoteHost
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /api/user/login", h.wrap(h.login))
	m.HandleFunc("POST /api/user/register", h.wrap(h.register))
	m.HandleFunc("POST /api/user/logout", h.wrap(h.logout))
	m.HandleFunc("POST /api/user/logout_all", h.user(h.logoutAll))
	m.HandleFunc("POST /api/user/password", h.user(h.changePassword))
	m.HandleFunc("GET /api/user/self", h.user(h.self))
	m.HandleFunc("POST /api/user/topup", h.user(h.topup))
	m.HandleFunc("POST /api/user/aff_transfer", h.user(h.affTransfer))
	m.HandleFunc("GET /api/user/models", h.user(h.listModels))
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
	m.HandleFunc("POST /api/admin/users/{id}/password", h.admin(h.resetPassword))
	m.HandleFunc("GET /api/admin/channels", h.admin(h.listChannels))
	m.HandleFunc("POST /api/admin/channels/{name}/test", h.admin(h.testChannel))
	m.HandleFunc("POST /api/admin/channels/test_all", h.admin(h.testAllChannels))
	m.HandleFunc("GET /api/admin/dashboard", h.admin(h.dashboard))
	m.HandleFunc("GET /api/admin/audit", h.admin(h.listAudit))
	m.HandleFunc("GET /api/admin/codes/export", h.admin(h.exportCodes))
	h.budgetRoutes(m)
	h.alertRoutes(m)
	h.runtimeRoutes(m)
	h.userPageRoutes(m)
	h.paymentRoutes(m)
	h.routeSSO(m)
	h.routeSignIn(m)
	m.HandleFunc(userPrefix, h.wrap(h.noRoute))
	m.HandleFunc(adminPrefix, h.wrap(h.noRoute))
	h.mux = m
	return h
}

const (
	userPrefix  = "/api/user/"
	adminPrefix = "/api/admin/"
)

// Handles reports whether path is the API's; other requests belong to
// whatever serves next.
func Handles(path string) bool {
	return strings.HasPrefix(path, userPrefix) || strings.HasPrefix(path, adminPrefix) || strings.HasPrefix(path, webhookPrefix)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// the API is for the console's scripts and for programs, never cached
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// noRoute tells a wrong method from a wrong path.
func (h *Handler) noRoute(_ http.ResponseWriter, r *http.Request) (any, error) {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" && !strings.HasSuffix(pattern, userPrefix) && !strings.HasSuffix(pattern, adminPrefix) {
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
	// token is the management key the caller sent; nil for a login
	// session. No key it makes or changes may be wider than it.
	token *store.Token
}

type userHandlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) (any, error)

// wrap writes a handler's answer or error as JSON.
func (h *Handler) wrap(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(w, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if _, ok := v.(answered); ok {
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// user authenticates the caller first.
func (h *Handler) user(fn userHandlerFunc) http.HandlerFunc {
	return h.wrap(func(w http.ResponseWriter, r *http.Request) (any, error) {
		c, err := h.authenticate(w, r)
		if err != nil {
			return nil, err
		}
		return fn(w, r, c)
	})
}

// admin authenticates the caller and requires an administrator.
func (h *Handler) admin(fn userHandlerFunc) http.HandlerFunc {
	return h.user(func(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
		if !account.IsAdmin(c.user) {
			return nil, errNotAdmin
		}
		if err := h.mustEnrol(r, c); err != nil {
			return nil, err
		}
		return fn(w, r, c)
	})
}

// authenticate finds the caller by key or by session. A key wins when both
// are sent. With the cookie, a request that changes state must come from
// the console's own origin with a JSON body.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (*caller, error) {
	if key := bearerKey(r); key != "" {
		id, err := h.keys.Lookup(r.Context(), key)
		if errors.Is(err, keys.ErrUnknownKey) {
			return nil, &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "invalid_api_key",
				msg: "the API key is not valid: check that you copied the whole sk-... key the gateway issued"}
		}
		if err != nil {
			return nil, err
		}
		if e := CheckIdentity(id); e != nil {
			return nil, &apiError{status: e.Status, typ: e.Type, code: e.Code, msg: e.Message}
		}
		// a key is for the model endpoints; only one a signed-in user made
		// as a management key speaks for its owner here, or any key handed
		// to a script would be a full account credential
		if !id.Token.Management {
			return nil, errNotManagementKey
		}
		// the cached user and key may be seconds old; account answers show
		// balances, and a key's quota left bounds the keys it makes
		u, err := h.store.UserByID(r.Context(), id.User.ID)
		if err != nil {
			return nil, err
		}
		t, err := h.store.TokenByID(r.Context(), id.Token.ID)
		if err != nil {
			return nil, err
		}
		return &caller{user: u, token: t}, nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if _, ok := h.sessions.cookie(r); ok && (!sameOrigin(r) || !jsonBody(r)) {
			return nil, errCrossSite
		}
	}
	u, err := h.sessions.user(w, r)
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

// clientNetwork is what the account gate counts a client by.
func (h *Handler) clientNetwork(r *http.Request) string {
	return account.ClientNetwork(h.address(r))
}

// RemoteHost is the host of the request's RemoteAddr: the client's IP
// when no server in front says better.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

var _ http.Handler = (*Handler)(nil)
