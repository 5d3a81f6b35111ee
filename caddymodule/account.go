package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

func init() {
	caddy.RegisterModule(Account{})
}

// Account serves the account and admin API under /api/user/ and
// /api/admin/; other requests pass to the next handler. Callers are known
// by the login session's cookie or by a gateway key (Bearer). Every answer,
// refusals included, is JSON, errors in OpenAI's shape.
type Account struct {
	app      *App
	log      *zap.Logger
	mux      *http.ServeMux
	attempts *attemptLimiter
	// signups counts registrations per address (IPv6: per /64), apart
	// from attempts: signing up is rare, so its limit is much lower.
	signups *attemptLimiter
}

// CaddyModule returns the Caddy module information.
func (Account) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_account",
		New: func() caddy.Module { return new(Account) },
	}
}

// Error types, in the gateway's typed vocabulary.
const (
	errInvalidRequest = adapters.ErrInvalidRequest
	errAuthentication = adapters.ErrAuthentication
	errPermission     = adapters.ErrPermission
	errNotFound       = adapters.ErrNotFound
	errRateLimit      = adapters.ErrRateLimit
	errAPI            = adapters.ErrAPI
)

// apiError is a refusal as the account API answers it.
type apiError struct {
	status        int
	typ           adapters.ErrorType
	code          string
	msg           string
	retryAfter    time.Duration
	allowedMethod string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: errInvalidRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

var (
	errNeedLogin = &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "not_logged_in",
		msg: "log in first (POST /api/user/login), or send a gateway key as 'Authorization: Bearer sk-...'"}
	errNotAdmin = &apiError{status: http.StatusForbidden, typ: errPermission, code: "admin_only",
		msg: "this needs an administrator's account"}
	errCrossSite = &apiError{status: http.StatusForbidden, typ: errPermission, code: "cross_origin",
		msg: "requests that change an account with the session cookie must come from the gateway's own pages with 'Content-Type: application/json'; other clients send 'Authorization: Bearer sk-...'"}
)

// Provision finds the gateway app and routes the API.
func (h *Account) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	limit, window := 10, time.Minute
	if c := app.AccountRateLimit; c != nil {
		if c.Attempts > 0 {
			limit = c.Attempts
		}
		if c.Window > 0 {
			window = time.Duration(c.Window)
		}
	}
	h.attempts = newAttemptLimiter(limit, window, maxAttemptKeys)
	signups, signupWindow := 10, time.Hour
	if c := app.RegistrationRateLimit; c != nil {
		if c.Attempts > 0 {
			signups = c.Attempts
		}
		if c.Window > 0 {
			signupWindow = time.Duration(c.Window)
		}
	}
	h.signups = newAttemptLimiter(signups, signupWindow, maxAttemptKeys)

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
		if !isAdmin(c.user) {
			return nil, errNotAdmin
		}
		return fn(w, r, c)
	})
}

func isAdmin(u *store.User) bool { return u.Role == store.RoleAdmin || u.Role == store.RoleRoot }

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
	if errors.Is(err, errSessionExpired) {
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

func (h *Account) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae *apiError
		ie *account.InputError
	)
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ie):
		ae = badRequest("invalid_request", "%s", ie.Msg)
	case errors.Is(err, store.ErrNotFound):
		ae = &apiError{status: http.StatusNotFound, typ: errNotFound, code: "not_found", msg: "no such item of yours: check the id"}
	default:
		h.log.Error("account request failed", zap.String("path", r.URL.Path), zap.Error(err))
		ae = &apiError{status: http.StatusInternalServerError, typ: errAPI, code: "internal_error",
			msg: "the gateway could not complete this request; try again, and tell the administrator if it persists"}
	}
	if ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(ae.retryAfter.Round(time.Second)/time.Second)+1))
	}
	if ae.allowedMethod != "" {
		w.Header().Set("Allow", ae.allowedMethod)
	}
	writeJSON(w, ae.status, map[string]any{"error": map[string]string{"message": ae.msg, "type": string(ae.typ), "code": ae.code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// maxAccountBody bounds an account request's body; none needs more.
const maxAccountBody = 64 << 10

// decode reads a JSON body into v, refusing unknown fields so a typo is
// reported rather than ignored.
func decode(r *http.Request, v any) error {
	if !jsonBody(r) {
		return &apiError{status: http.StatusUnsupportedMediaType, typ: errInvalidRequest, code: "unsupported_media_type",
			msg: "send the body as JSON with 'Content-Type: application/json'"}
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAccountBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return badRequest("invalid_json", "the body is empty: send a JSON object")
		}
		return badRequest("invalid_json", "the body is not the JSON object expected: %v", err)
	}
	return nil
}

// clientAddress is the client's IP as Caddy determined it (trusted proxies
// included), for rate limits.
func clientAddress(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// clientNetwork is what rate limits count a client by: its IPv4 address,
// or the /64 of its IPv6 address, since one subscriber is commonly given a
// whole /64 and so could otherwise speak from unlimited addresses.
func clientNetwork(r *http.Request) string {
	a := clientAddress(r)
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

func tooMany(action string, wait time.Duration) *apiError {
	return &apiError{status: http.StatusTooManyRequests, typ: errRateLimit, code: "rate_limited", retryAfter: wait,
		msg: fmt.Sprintf("too many %s attempts: wait %s and try again", action, wait.Round(time.Second))}
}

// limit counts an attempt at action by the client's address and the
// given subjects (a user id); 429 when any is over the limit.
func (h *Account) limit(r *http.Request, action string, subjects ...string) error {
	ks := []string{action + " ip " + clientNetwork(r)}
	for _, s := range subjects {
		ks = append(ks, action+" user "+s)
	}
	ok, wait := h.attempts.allow(time.Now(), ks...)
	if ok {
		return nil
	}
	return tooMany(action, wait)
}

// loginAttempt names the limiter keys one login counts on: the address,
// the address at this username, and the username from anywhere.
type loginAttempt struct {
	addr, pair, user string
}

// startLogin admits a login attempt or refuses it with 429. An address is
// limited on its own failures, so nobody can lock a user out from
// elsewhere: failures at a username from many addresses refuse further
// attempts only from addresses that have themselves failed at it, which
// slows a spread-out guesser to one guess per address and window and
// never refuses the right password from an address that has not failed.
// The decision comes before the password is checked, so a 429 says
// nothing about whether the guess was right.
func (h *Account) startLogin(r *http.Request, username string) (loginAttempt, error) {
	now := time.Now()
	network := clientNetwork(r)
	a := loginAttempt{addr: "login ip " + network, pair: "login ip " + network + " user " + username, user: "login user " + username}
	// the address first, so a refused address keeps no username
	if ok, wait := h.attempts.allow(now, a.addr); !ok {
		return a, tooMany("login", wait)
	}
	pairFailures, pairWait := h.attempts.count(now, a.pair)
	if pairFailures >= h.attempts.limit {
		h.attempts.undo(now, a.addr)
		return a, tooMany("login", pairWait)
	}
	if pairFailures > 0 {
		if userFailures, _ := h.attempts.count(now, a.user); userFailures >= h.attempts.limit {
			h.attempts.undo(now, a.addr)
			return a, tooMany("login", pairWait)
		}
	}
	return a, nil
}

// endLogin records how an admitted attempt ended: a failure counts at the
// username, here and from anywhere; the right password gives the address
// its attempt back, so many people logging in behind one address are not
// refused for each other's successes.
func (h *Account) endLogin(a loginAttempt, failed bool) {
	now := time.Now()
	if failed {
		h.attempts.add(now, a.pair)
		h.attempts.add(now, a.user)
		return
	}
	h.attempts.undo(now, a.addr)
}

// userView is what the API shows of a user: never the password hash. The
// invitation fields carry new-api's names (aff_code, aff_quota), which
// console scripts written for it expect.
type userView struct {
	ID           int64  `json:"id"`
	Username     string `json:"username"`
	Role         string `json:"role"`
	Status       string `json:"status"`
	Quota        int64  `json:"quota"`
	UsedQuota    int64  `json:"used_quota"`
	RequestCount int64  `json:"request_count"`
	AffCode      string `json:"aff_code"`
	AffQuota     int64  `json:"aff_quota"`
	CreatedAt    int64  `json:"created_at"`
	// Limits are the user's own rate limits over all of their keys; a zero
	// field means the gateway's default.
	Limits store.Limits `json:"limits"`
}

func viewUser(u *store.User) userView {
	return userView{ID: u.ID, Username: u.Username, Role: u.Role, Status: u.Status, Quota: u.Quota,
		UsedQuota: u.UsedQuota, RequestCount: u.RequestCount, AffCode: u.InviteCode,
		AffQuota: u.InvitationQuota, CreatedAt: u.CreatedAt.Unix(), Limits: u.Limits}
}

// limitsInput is a change of rate limits in an administrator's request:
// absent fields keep their value, 0 clears one (the gateway's default
// applies). Only administrators set limits, so a user cannot lift their own.
type limitsInput struct {
	RPM         *int64 `json:"rpm"`
	TPM         *int64 `json:"tpm"`
	MaxParallel *int64 `json:"max_parallel"`
}

func (in *limitsInput) apply(l store.Limits) (store.Limits, error) {
	for _, f := range []struct {
		name string
		v    *int64
		into *int64
	}{{"rpm", in.RPM, &l.RPM}, {"tpm", in.TPM, &l.TPM}, {"max_parallel", in.MaxParallel, &l.MaxParallel}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return l, badRequest("invalid_limits", "limits.%s must be 0 (the gateway's default) or a positive number, not %d", f.name, *f.v)
		}
		*f.into = *f.v
	}
	return l, nil
}

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
	AffCode  string `json:"aff_code,omitempty"`
}

func (h *Account) login(w http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in credentials
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.AffCode != "" {
		return nil, badRequest("invalid_request", "aff_code belongs to registration, not login")
	}
	// before the name is kept anywhere: a name no user can have is refused
	// as it is, however long
	if err := account.CheckUsername(in.Username); err != nil {
		return nil, err
	}
	attempt, err := h.startLogin(r, in.Username)
	if err != nil {
		return nil, err
	}
	u, err := account.Login(r.Context(), h.app.db.store, in.Username, in.Password)
	if errors.Is(err, account.ErrBadCredentials) {
		h.endLogin(attempt, true)
		return nil, &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "invalid_credentials",
			msg: "wrong username or password"}
	}
	if err != nil {
		return nil, err
	}
	h.endLogin(attempt, false)
	if err := h.app.startSession(r.Context(), w, r, u.ID); err != nil {
		return nil, err
	}
	return viewUser(u), nil
}

func (h *Account) register(w http.ResponseWriter, r *http.Request) (any, error) {
	if !h.app.Registration {
		return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "registration_closed",
			msg: "registration is closed on this gateway: ask its administrator for an account"}
	}
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in credentials
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := account.CheckUsername(in.Username); err != nil {
		return nil, err
	}
	if err := h.limit(r, "register"); err != nil {
		return nil, err
	}
	// a signup is counted before it is made, so concurrent ones cannot
	// all pass, and given back when it is refused
	now, network := time.Now(), "signup "+clientNetwork(r)
	if ok, wait := h.signups.allow(now, network); !ok {
		return nil, &apiError{status: http.StatusTooManyRequests, typ: errRateLimit, code: "rate_limited", retryAfter: wait,
			msg: fmt.Sprintf("too many accounts were registered from your address: wait %s and try again", wait.Round(time.Second))}
	}
	u, err := account.Register(r.Context(), h.app.db.store, in.Username, in.Password, strings.TrimSpace(in.AffCode), h.app.InvitationReward)
	if err != nil {
		h.signups.undo(now, network)
		return nil, err
	}
	return viewUser(u), nil
}

func (h *Account) logout(w http.ResponseWriter, r *http.Request) (any, error) {
	c, ok := sessionCookieOf(r)
	if !ok {
		return struct{}{}, nil // logged out already
	}
	if !sameOrigin(r) || !jsonBody(r) {
		return nil, errCrossSite
	}
	if err := h.app.db.store.DeleteSession(r.Context(), keys.Hash(c.Value)); err != nil {
		return nil, err
	}
	setSessionCookie(w, r, "", 0)
	return struct{}{}, nil
}

// logoutAll ends every session of the caller, this one included: for a
// lost or shared device, with the session or with a key.
func (h *Account) logoutAll(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if err := h.app.db.store.DeleteUserSessions(r.Context(), c.user.ID); err != nil {
		return nil, err
	}
	if _, ok := sessionCookieOf(r); ok {
		setSessionCookie(w, r, "", 0)
	}
	return struct{}{}, nil
}

// changePassword sets the caller's password, given the current one, and
// ends every other session of theirs; the session that asked stays.
func (h *Account) changePassword(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		CurrentPassword string `json:"current_password"`
		Password        string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	// a guess at the current password is a login attempt
	if err := h.limit(r, "password", strconv.FormatInt(c.user.ID, 10)); err != nil {
		return nil, err
	}
	keep := ""
	if sc, ok := sessionCookieOf(r); ok && bearerKey(r) == "" {
		keep = keys.Hash(sc.Value)
	}
	if err := account.ChangePassword(r.Context(), h.app.db.store, c.user, in.CurrentPassword, in.Password, keep); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (h *Account) self(_ http.ResponseWriter, _ *http.Request, c *caller) (any, error) {
	return viewUser(c.user), nil
}

func (h *Account) topup(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Key string `json:"key"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := h.limit(r, "topup", strconv.FormatInt(c.user.ID, 10)); err != nil {
		return nil, err
	}
	added, err := account.Redeem(r.Context(), h.app.db.store, c.user.ID, in.Key)
	if err != nil {
		if errors.Is(err, account.ErrCodeRefused) {
			return nil, badRequest("invalid_redemption_code", "%s", err.Error())
		}
		return nil, err
	}
	// spendable at once, not after the ledger's next sync with the store
	h.app.db.ledger.Credit(c.user.ID, added)
	return struct{}{}, nil
}

func (h *Account) affTransfer(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Quota *int64 `json:"quota"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	var amount int64
	if in.Quota != nil {
		amount = *in.Quota
		if amount <= 0 {
			return nil, badRequest("invalid_quota", "quota must be a positive number of units, or left out to move all of it")
		}
	}
	moved, err := account.Transfer(r.Context(), h.app.db.store, c.user.ID, amount, in.Quota == nil)
	if err != nil {
		return nil, err
	}
	h.app.db.ledger.Credit(c.user.ID, moved)
	u, err := h.app.db.store.UserByID(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"transferred": moved, "quota": u.Quota, "aff_quota": u.InvitationQuota}, nil
}

// models lists the models the caller can ask for: served and priced, each
// saying whether it chats (what the playground can run).
func (h *Account) models(_ http.ResponseWriter, _ *http.Request, _ *caller) (any, error) {
	type model struct {
		ID   string `json:"id"`
		Chat bool   `json:"chat"`
	}
	out := []model{}
	for _, m := range h.app.channels.Models() {
		if p, ok := h.app.prices[m]; ok {
			out = append(out, model{ID: m, Chat: p.Chat()})
		}
	}
	return map[string]any{"data": out}, nil
}

// tokenView is a token as its owner sees it: a prefix, never the key.
type tokenView struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	KeyPrefix  string   `json:"key_prefix"`
	Status     string   `json:"status"`
	QuotaLimit int64    `json:"quota_limit"`
	UsedQuota  int64    `json:"used_quota"`
	Models     []string `json:"models"`
	ExpiresAt  string   `json:"expires_at,omitempty"` // RFC 3339; absent: never
	CreatedAt  string   `json:"created_at"`
	// Limits are the key's rate limits (set by an administrator); a zero
	// field means the user's or the gateway's default.
	Limits store.Limits `json:"limits"`
	Key    string       `json:"key,omitempty"` // only in the answer that creates it
}

func viewToken(t *store.Token) tokenView {
	v := tokenView{ID: t.ID, Name: t.Name, KeyPrefix: t.KeyPrefix, Status: t.Status, QuotaLimit: t.QuotaLimit,
		UsedQuota: t.UsedQuota, Models: t.Models, CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339), Limits: t.Limits}
	if v.Models == nil {
		v.Models = []string{}
	}
	if !t.ExpiresAt.IsZero() {
		v.ExpiresAt = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return v
}

func (h *Account) listTokens(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	tokens, err := h.app.db.store.ListTokens(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	out := make([]tokenView, len(tokens))
	for i, t := range tokens {
		out[i] = viewToken(t)
	}
	return map[string]any{"data": out}, nil
}

// tokenInput is a token's fields in a request; absent fields keep their
// value on update.
type tokenInput struct {
	Name       *string   `json:"name"`
	QuotaLimit *int64    `json:"quota_limit"`
	Models     *[]string `json:"models"`
	// ExpiresAt is RFC 3339; "" means never.
	ExpiresAt *string `json:"expires_at"`
	Status    *string `json:"status"`
}

func (in *tokenInput) apply(spec *account.TokenSpec) error {
	if in.Name != nil {
		spec.Name = *in.Name
	}
	if in.QuotaLimit != nil {
		spec.QuotaLimit = *in.QuotaLimit
	}
	if in.Models != nil {
		spec.Models = *in.Models
	}
	if in.ExpiresAt != nil {
		spec.ExpiresAt = time.Time{}
		if *in.ExpiresAt != "" {
			t, err := time.Parse(time.RFC3339, *in.ExpiresAt)
			if err != nil {
				return badRequest("invalid_expires_at", "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z, or \"\" for never")
			}
			spec.ExpiresAt = t
		}
	}
	return nil
}

func (h *Account) createToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in tokenInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Status != nil {
		return nil, badRequest("invalid_request", "a new token is always enabled: leave out status")
	}
	var spec account.TokenSpec
	if err := in.apply(&spec); err != nil {
		return nil, err
	}
	key, t, err := account.CreateToken(r.Context(), h.app.db.store, c.user.ID, spec)
	if err != nil {
		return nil, err
	}
	v := viewToken(t)
	v.Key = key
	return v, nil
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("invalid_id", "the id in the path must be a positive integer, not %q", r.PathValue("id"))
	}
	return id, nil
}

// ownToken returns the caller's token id, or ErrNotFound for anyone else's:
// another user's token looks exactly like a missing one.
func (h *Account) ownToken(r *http.Request, c *caller) (*store.Token, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	t, err := h.app.db.store.TokenByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if t.UserID != c.user.ID {
		return nil, fmt.Errorf("token %d: %w", id, store.ErrNotFound)
	}
	return t, nil
}

func (h *Account) updateToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	t, err := h.ownToken(r, c)
	if err != nil {
		return nil, err
	}
	var in tokenInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	spec := account.TokenSpec{Name: t.Name, QuotaLimit: t.QuotaLimit, Models: t.Models, ExpiresAt: t.ExpiresAt}
	if err := in.apply(&spec); err != nil {
		return nil, err
	}
	status := t.Status
	if in.Status != nil {
		status = *in.Status
	}
	updated, err := account.UpdateToken(r.Context(), h.app.db.store, c.user.ID, t.ID, spec, status)
	if err != nil {
		return nil, err
	}
	h.app.db.keys.Forget(t.KeyHash)
	return viewToken(updated), nil
}

func (h *Account) deleteToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	t, err := h.ownToken(r, c)
	if err != nil {
		return nil, err
	}
	if err := h.app.db.store.DeleteToken(r.Context(), c.user.ID, t.ID); err != nil {
		return nil, err
	}
	h.app.db.keys.Forget(t.KeyHash)
	return struct{}{}, nil
}

// usageQuery reads the usage filter from the query string:
// limit (1-100, default 20), model, since and until (RFC 3339 or unix
// seconds), after (the next_cursor of the page before).
func usageQuery(r *http.Request, f *store.UsageFilter) error {
	q := r.URL.Query()
	f.Limit = 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("invalid_limit", "limit must be a whole number from 1 to 100, not %q", v)
		}
		f.Limit = n
	}
	f.Model = q.Get("model")
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := parseTime(v)
		if err != nil {
			return badRequest("invalid_"+name, "%s must be an RFC 3339 time or unix seconds, not %q", name, v)
		}
		*dst = t
	}
	if v := q.Get("after"); v != "" {
		ms, id, ok := strings.Cut(v, "_")
		msN, err1 := strconv.ParseInt(ms, 10, 64)
		idN, err2 := strconv.ParseInt(id, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return badRequest("invalid_cursor", "after must be the next_cursor of the previous page, as it was given")
		}
		f.After = &store.UsageCursor{CreatedAt: time.UnixMilli(msN), ID: idN}
	}
	return nil
}

func parseTime(v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Parse(time.RFC3339, v)
}

func (h *Account) listUsage(r *http.Request, f store.UsageFilter) (any, error) {
	logs, err := h.app.db.store.ListUsage(r.Context(), f)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(logs) == f.Limit {
		last := logs[len(logs)-1]
		next = fmt.Sprintf("%d_%d", last.CreatedAt.UnixMilli(), last.ID)
	}
	return map[string]any{"data": logs, "next_cursor": next}, nil
}

func (h *Account) usage(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var f store.UsageFilter
	if err := usageQuery(r, &f); err != nil {
		return nil, err
	}
	if r.URL.Query().Has("user_id") {
		return nil, badRequest("invalid_request", "user_id is for administrators (GET /api/admin/usage); this lists your own usage")
	}
	f.UserID = c.user.ID
	return h.listUsage(r, f)
}

// dailySpend answers one entry per UTC day for the last days (default 30,
// at most 366) days, today included, zero-filled.
func (h *Account) dailySpend(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 366 {
			return nil, badRequest("invalid_days", "days must be a whole number from 1 to 366, not %q", v)
		}
		days = n
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, 1-days)
	spent, err := h.app.db.store.DailySpend(r.Context(), c.user.ID, first)
	if err != nil {
		return nil, err
	}
	type day struct {
		Day      string `json:"day"`
		Cost     int64  `json:"cost"`
		Requests int64  `json:"requests"`
	}
	out := make([]day, days)
	for i := range out {
		out[i].Day = first.AddDate(0, 0, i).Format(time.DateOnly)
	}
	for _, s := range spent {
		if i := int(s.Day.Sub(first) / (24 * time.Hour)); i >= 0 && i < days {
			out[i].Cost, out[i].Requests = s.Cost, s.Requests
		}
	}
	return map[string]any{"data": out}, nil
}

// queryID reads an optional id cursor from the query string; 0 if absent.
func queryID(r *http.Request, name, what string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid_cursor", "%s must be %s, not %q", name, what, v)
	}
	return n, nil
}

func (h *Account) listUsers(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	f := store.UserFilter{Limit: 50}
	var err error
	if f.AfterID, err = queryID(r, "after", "a user id"); err != nil {
		return nil, err
	}
	users, err := h.app.db.store.ListUsers(r.Context(), f)
	if err != nil {
		return nil, err
	}
	out := make([]userView, len(users))
	for i, u := range users {
		out[i] = viewUser(u)
	}
	next := ""
	if len(users) == f.Limit {
		next = strconv.FormatInt(users[len(users)-1].ID, 10)
	}
	return map[string]any{"data": out, "next_cursor": next}, nil
}

// mayGrant says whether actor may give role: only root makes admins, and
// root is the one account made at bootstrap.
func mayGrant(actor *store.User, role string) error {
	switch {
	case role == store.RoleRoot:
		return &apiError{status: http.StatusForbidden, typ: errPermission, code: "role_not_allowed", msg: "there is one root account; it cannot be granted"}
	case role == store.RoleAdmin && actor.Role != store.RoleRoot:
		return &apiError{status: http.StatusForbidden, typ: errPermission, code: "role_not_allowed", msg: "only root can make administrators"}
	}
	return account.CheckRole(role)
}

func (h *Account) createUser(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Role     string `json:"role"`
		Quota    int64  `json:"quota"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Role == "" {
		in.Role = store.RoleUser
	}
	if err := mayGrant(c.user, in.Role); err != nil {
		return nil, err
	}
	u, err := account.CreateUser(r.Context(), h.app.db.store, account.NewUser{Username: in.Username, Password: in.Password, Role: in.Role, Quota: in.Quota})
	if err != nil {
		return nil, err
	}
	return viewUser(u), nil
}

func (h *Account) updateUser(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Status     *string      `json:"status"`
		Role       *string      `json:"role"`
		QuotaDelta *int64       `json:"quota_delta"`
		Limits     *limitsInput `json:"limits"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	ctx := r.Context()
	st := h.app.db.store
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	// administrators manage users; only root manages administrators
	if target.Role == store.RoleRoot || target.Role == store.RoleAdmin && c.user.Role != store.RoleRoot {
		if target.ID != c.user.ID || in.Status != nil || in.Role != nil || in.Limits != nil {
			return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "not_allowed",
				msg: "only root can change an administrator, and root's own role and status are fixed"}
		}
	}
	if target.ID == c.user.ID && (in.Status != nil || in.Role != nil) {
		return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "not_allowed",
			msg: "you cannot change your own role or status: ask another administrator"}
	}
	if in.Status != nil && *in.Status != store.UserEnabled && *in.Status != store.UserDisabled {
		return nil, badRequest("invalid_status", "status must be enabled or disabled, not %q", *in.Status)
	}
	if in.Role != nil {
		if err := mayGrant(c.user, *in.Role); err != nil {
			return nil, err
		}
	}
	if in.QuotaDelta != nil && target.Quota+*in.QuotaDelta < 0 {
		return nil, badRequest("invalid_quota", "quota_delta %d would take the balance of %d below zero", *in.QuotaDelta, target.Quota)
	}
	var limits store.Limits
	if in.Limits != nil {
		if limits, err = in.Limits.apply(target.Limits); err != nil {
			return nil, err
		}
	}
	if in.Status != nil {
		if err := st.SetUserStatus(ctx, id, *in.Status); err != nil {
			return nil, err
		}
		if *in.Status == store.UserDisabled {
			if err := st.DeleteUserSessions(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	if in.Role != nil && *in.Role != target.Role {
		if err := st.SetUserRole(ctx, id, *in.Role); err != nil {
			return nil, err
		}
		// every request reads the role afresh, but a session is ended too:
		// a login made for one role does not carry over to another, and
		// whoever holds a copy of a demoted user's cookie loses it
		if err := st.DeleteUserSessions(ctx, id); err != nil {
			return nil, err
		}
	}
	if in.QuotaDelta != nil && *in.QuotaDelta != 0 {
		// a credit is a payment, which may owe an inviter their reward
		add := st.CreditQuota
		if *in.QuotaDelta < 0 {
			add = st.AddQuota
		}
		if err := add(ctx, id, *in.QuotaDelta); err != nil {
			return nil, err
		}
		h.app.db.ledger.Credit(id, *in.QuotaDelta)
	}
	if in.Limits != nil {
		if err := st.SetUserLimits(ctx, id, limits); err != nil {
			return nil, err
		}
		// the user's keys carry the user's limits: admit on the new ones now
		h.app.db.keys.ForgetUser(id)
	}
	u, err := st.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return viewUser(u), nil
}

// updateTokenLimits sets any user's key's rate limits: PATCH
// /api/admin/tokens/{id} {"limits":{"rpm":N,"tpm":N,"max_parallel":N}}.
// Administrators manage users' keys; only root manages administrators'.
func (h *Account) updateTokenLimits(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Limits *limitsInput `json:"limits"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Limits == nil {
		return nil, badRequest("invalid_request", `send {"limits":{"rpm":N,"tpm":N,"max_parallel":N}}: the fields to change, 0 to clear one`)
	}
	ctx := r.Context()
	st := h.app.db.store
	t, err := st.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	owner, err := st.UserByID(ctx, t.UserID)
	if err != nil {
		return nil, err
	}
	if (owner.Role == store.RoleRoot || owner.Role == store.RoleAdmin) && c.user.Role != store.RoleRoot {
		return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "not_allowed",
			msg: "only root can change the limits of an administrator's key"}
	}
	limits, err := in.Limits.apply(t.Limits)
	if err != nil {
		return nil, err
	}
	if err := st.SetTokenLimits(ctx, id, limits); err != nil {
		return nil, err
	}
	h.app.db.keys.Forget(t.KeyHash)
	t.Limits = limits
	return viewToken(t), nil
}

// codeView is a redemption code as administrators see it.
type codeView struct {
	ID         int64  `json:"id"`
	Code       string `json:"code"`
	Quota      int64  `json:"quota"`
	Status     string `json:"status"`
	UsedBy     int64  `json:"used_by"`
	CreatedAt  string `json:"created_at"`
	RedeemedAt string `json:"redeemed_at,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

func viewCode(c *store.RedemptionCode) codeView {
	v := codeView{ID: c.ID, Code: c.Code, Quota: c.Quota, Status: c.Status, UsedBy: c.UsedBy,
		CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339)}
	if !c.RedeemedAt.IsZero() {
		v.RedeemedAt = c.RedeemedAt.UTC().Format(time.RFC3339)
	}
	if !c.ExpiresAt.IsZero() {
		v.ExpiresAt = c.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return v
}

func viewCodes(codes []*store.RedemptionCode) []codeView {
	out := make([]codeView, len(codes))
	for i, c := range codes {
		out[i] = viewCode(c)
	}
	return out
}

func (h *Account) listCodes(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	f := store.CodeFilter{Limit: 50}
	var err error
	if f.BeforeID, err = queryID(r, "before", "a code id"); err != nil {
		return nil, err
	}
	codes, err := h.app.db.store.ListRedemptionCodes(r.Context(), f)
	if err != nil {
		return nil, err
	}
	next := ""
	if len(codes) == f.Limit {
		next = strconv.FormatInt(codes[len(codes)-1].ID, 10)
	}
	return map[string]any{"data": viewCodes(codes), "next_cursor": next}, nil
}

func (h *Account) createCodes(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	var in struct {
		Count     int    `json:"count"`
		Quota     int64  `json:"quota"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Count == 0 {
		in.Count = 1
	}
	var expires time.Time
	if in.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err != nil {
			return nil, badRequest("invalid_expires_at", "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		expires = t
	}
	codes, err := account.CreateCodes(r.Context(), h.app.db.store, in.Count, in.Quota, expires)
	if err != nil {
		return nil, err
	}
	return map[string]any{"data": viewCodes(codes)}, nil
}

func (h *Account) updateCode(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Status string `json:"status"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if !slices.Contains([]string{store.CodeEnabled, store.CodeDisabled}, in.Status) {
		return nil, badRequest("invalid_status", "status must be enabled or disabled, not %q", in.Status)
	}
	if err := h.app.db.store.SetRedemptionCodeStatus(r.Context(), id, in.Status); err != nil {
		return nil, err
	}
	return map[string]any{"id": id, "status": in.Status}, nil
}

func (h *Account) adminUsage(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	var f store.UsageFilter
	if err := usageQuery(r, &f); err != nil {
		return nil, err
	}
	if v := r.URL.Query().Get("user_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, badRequest("invalid_user_id", "user_id must be a user's id, not %q", v)
		}
		f.UserID = n
	}
	return h.listUsage(r, f)
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Account)(nil)
	_ caddy.Provisioner           = (*Account)(nil)
)
