package caddymodule

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// sessionCookie carries a web login. The store keeps only its hash, so a
// copy of the database lets nobody in. Over HTTPS it is named
// secureSessionCookie: browsers take a __Host- cookie only from a secure
// origin, for this host alone and for every path, so no other subdomain
// and no plain-HTTP page can set or shadow it.
const (
	sessionCookie       = "gateway_session"
	secureSessionCookie = "__Host-" + sessionCookie
)

// secureRequest reports whether the client reached the gateway over HTTPS:
// its own TLS, or X-Forwarded-Proto from a peer in the server's
// trusted_proxies (from anyone else that header is the client's word).
func secureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); !trusted {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// sessionCookieName is the session cookie's name for this request. Over
// HTTPS only the __Host- name is read, so a cookie planted without the
// prefix cannot stand in for a session.
func sessionCookieName(r *http.Request) string {
	if secureRequest(r) {
		return secureSessionCookie
	}
	return sessionCookie
}

// sessionCookieOf returns the request's session cookie, if it has one.
func sessionCookieOf(r *http.Request) (*http.Cookie, bool) {
	c, err := r.Cookie(sessionCookieName(r))
	return c, err == nil && c.Value != ""
}

// sessions are the app's web logins, with the configured lifetime.
func (a *App) sessions() account.Sessions {
	return account.Sessions{Store: a.db.store, Lifetime: time.Duration(a.SessionLifetime)}
}

// startSession stores a new session for userID and sets its cookie.
func (a *App) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, userID int64) error {
	sessions := a.sessions()
	id, err := sessions.Start(ctx, userID)
	if err != nil {
		return err
	}
	setSessionCookie(w, r, id, sessions.MaxAge())
	return nil
}

func setSessionCookie(w http.ResponseWriter, r *http.Request, id string, lifetime time.Duration) {
	c := &http.Cookie{Name: sessionCookieName(r), Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secureRequest(r), MaxAge: int(lifetime.Seconds())}
	if id == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// errNoSession means the request carries no session cookie at all.
var errNoSession = errors.New("no session")

// sessionUser returns the user a session cookie belongs to, or
// account.ErrSessionExpired, and sends the cookie again when the session
// slid forward.
func (a *App) sessionUser(w http.ResponseWriter, r *http.Request) (*store.User, error) {
	c, ok := sessionCookieOf(r)
	if !ok {
		return nil, errNoSession
	}
	sessions := a.sessions()
	u, slid, err := sessions.User(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	if slid {
		setSessionCookie(w, r, c.Value, sessions.MaxAge())
	}
	return u, nil
}

// sameOrigin reports whether a browser sent the request from the gateway's
// own pages. Browsers send Sec-Fetch-Site (or at least Origin) on every
// request that can change state; a request with neither is not a browser's
// and so gets no cookie-based trust.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// crossOrigin reports whether the request says it comes from another site.
func crossOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site != "same-origin" && site != "none"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err != nil || u.Host != r.Host
	}
	return false
}

// jsonBody reports whether the request declares a JSON body. A form on
// another site cannot send one without a CORS preflight the gateway never
// answers, which is what makes it a CSRF defence.
func jsonBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// sessionIdentity lets the console's playground call the model endpoints
// with the session cookie instead of a key. It returns nil, nil when there
// is no cookie. The cookie is honoured only for same-origin JSON requests,
// and the request is billed to the user's "playground" token, made on first
// use, so every usage row still names a token.
func (a *App) sessionIdentity(w http.ResponseWriter, r *http.Request) (*keys.Identity, *adapters.Error) {
	if _, ok := sessionCookieOf(r); !ok {
		return nil, nil
	}
	if !sameOrigin(r) || !jsonBody(r) {
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "cross_origin_session",
			Message: "the session cookie is accepted only on JSON requests from the gateway's own pages; other clients send 'Authorization: Bearer sk-...'"}
	}
	u, err := a.sessionUser(w, r)
	if errors.Is(err, account.ErrSessionExpired) {
		return nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "session_expired", Message: err.Error()}
	}
	if err != nil {
		a.log.Error("reading a session", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot check sessions right now; try again shortly")
	}
	t, err := account.PlaygroundToken(r.Context(), a.db.store, u.ID)
	if err != nil {
		a.log.Error("finding the playground token", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot prepare the playground right now; try again shortly")
	}
	return &keys.Identity{Token: t, User: u}, nil
}
