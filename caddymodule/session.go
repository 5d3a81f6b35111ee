package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
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

// sessionIDLength is 43 base-62 characters: about 256 bits.
const sessionIDLength = 43

// playgroundToken names the token a user's playground requests are billed
// to, so they appear in usage like any other request.
const playgroundToken = "playground"

func (a *App) sessionLifetime() time.Duration {
	if a.SessionLifetime > 0 {
		return time.Duration(a.SessionLifetime)
	}
	return 7 * 24 * time.Hour
}

// startSession stores a new session for userID and sets its cookie.
func (a *App) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, userID int64) error {
	id, err := keys.Random("", sessionIDLength)
	if err != nil {
		return err
	}
	expires := time.Now().Add(a.sessionLifetime())
	if err := a.db.store.CreateSession(ctx, &store.Session{IDHash: keys.Hash(id), UserID: userID, ExpiresAt: expires}); err != nil {
		return fmt.Errorf("starting a session: %w", err)
	}
	setSessionCookie(w, r, id, a.sessionLifetime())
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

// errSessionExpired means the cookie names no live session.
var errSessionExpired = errors.New("the session has expired or was ended: log in again")

// sessionUser returns the user a session cookie belongs to. It slides the session's expiry forward once a quarter of
// its lifetime has passed, so an active user stays logged in without a
// write on every request.
func (a *App) sessionUser(w http.ResponseWriter, r *http.Request) (*store.User, error) {
	c, ok := sessionCookieOf(r)
	if !ok {
		return nil, errNoSession
	}
	ctx := r.Context()
	h := keys.Hash(c.Value)
	sess, err := a.db.store.SessionByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errSessionExpired
	}
	if err != nil {
		return nil, err
	}
	u, err := a.db.store.UserByID(ctx, sess.UserID)
	if errors.Is(err, store.ErrNotFound) || err == nil && u.Status != store.UserEnabled {
		return nil, errSessionExpired
	}
	if err != nil {
		return nil, err
	}
	life := a.sessionLifetime()
	if time.Until(sess.ExpiresAt) < life*3/4 {
		if err := a.db.store.TouchSession(ctx, h, time.Now().Add(life)); err == nil {
			setSessionCookie(w, r, c.Value, life)
		}
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

// playgroundMu keeps two first playground requests of one user from each
// creating a playground token.
var playgroundMu sync.Mutex

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
	if errors.Is(err, errSessionExpired) {
		return nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "session_expired", Message: err.Error()}
	}
	if err != nil {
		a.log.Error("reading a session", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot check sessions right now; try again shortly")
	}
	t, err := a.playgroundToken(r.Context(), u.ID)
	if err != nil {
		a.log.Error("finding the playground token", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot prepare the playground right now; try again shortly")
	}
	return &keys.Identity{Token: t, User: u}, nil
}

func (a *App) playgroundToken(ctx context.Context, userID int64) (*store.Token, error) {
	playgroundMu.Lock()
	defer playgroundMu.Unlock()
	tokens, err := a.db.store.ListTokens(ctx, userID)
	if err != nil {
		return nil, err
	}
	for _, t := range tokens {
		if t.Name == playgroundToken {
			return t, nil
		}
	}
	// the key is thrown away: only the session uses this token
	_, t, err := account.CreateToken(ctx, a.db.store, userID, account.TokenSpec{Name: playgroundToken})
	return t, err
}
