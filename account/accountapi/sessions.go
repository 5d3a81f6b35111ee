package accountapi

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

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

// Sessions are web logins carried in a cookie.
type Sessions struct {
	Logins account.Sessions
	// TrustedProxy reports whether the request came from a peer in the
	// server's trusted proxies, whose X-Forwarded-Proto is believed; nil
	// means no peer is trusted.
	TrustedProxy func(*http.Request) bool
	// Log reports the store failing under a playground request.
	Log *zap.Logger
}

// Secure reports whether the client reached the gateway over HTTPS: its
// own TLS, or X-Forwarded-Proto from a trusted proxy (from anyone else
// that header is the client's word).
func (s *Sessions) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if s.TrustedProxy == nil || !s.TrustedProxy(r) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// CookieName is the session cookie's name for this request. Over HTTPS
// only the __Host- name is read, so a cookie planted without the prefix
// cannot stand in for a session.
func (s *Sessions) CookieName(r *http.Request) string {
	if s.Secure(r) {
		return secureSessionCookie
	}
	return sessionCookie
}

// cookie returns the request's session cookie, if it has one.
func (s *Sessions) cookie(r *http.Request) (*http.Cookie, bool) {
	c, err := r.Cookie(s.CookieName(r))
	return c, err == nil && c.Value != ""
}

// start stores a new session for userID, sets its cookie and returns its
// id.
func (s *Sessions) start(ctx context.Context, w http.ResponseWriter, r *http.Request, userID int64) (string, error) {
	id, err := s.Logins.Start(ctx, userID)
	if err != nil {
		return "", err
	}
	s.setCookie(w, r, id, s.Logins.MaxAge())
	return id, nil
}

// setCookie sends the session cookie; an empty id clears it.
func (s *Sessions) setCookie(w http.ResponseWriter, r *http.Request, id string, lifetime time.Duration) {
	c := &http.Cookie{Name: s.CookieName(r), Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.Secure(r), MaxAge: int(lifetime.Seconds())}
	if id == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// errNoSession means the request carries no session cookie at all.
var errNoSession = errors.New("no session")

// user returns the user a session cookie belongs to, or
// account.ErrSessionExpired, and sends the cookie again when the session
// slid forward.
func (s *Sessions) user(w http.ResponseWriter, r *http.Request) (*store.User, error) {
	c, ok := s.cookie(r)
	if !ok {
		return nil, errNoSession
	}
	u, slidTo, err := s.Logins.User(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	if !slidTo.IsZero() {
		s.setCookie(w, r, c.Value, time.Until(slidTo))
	}
	return u, nil
}

// Identity lets the console's playground call the model endpoints with
// the session cookie instead of a key. It returns nil, nil when there is
// no cookie. The cookie is honoured only for same-origin JSON requests,
// and the request is billed to the user's "playground" token, made on
// first use, so every usage row still names a token.
func (s *Sessions) Identity(w http.ResponseWriter, r *http.Request) (*keys.Identity, *adapters.Error) {
	if _, ok := s.cookie(r); !ok {
		return nil, nil
	}
	if !sameOrigin(r) || !jsonBody(r) {
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "cross_origin_session",
			Message: "the session cookie is accepted only on JSON requests from the gateway's own pages; other clients send 'Authorization: Bearer sk-...'"}
	}
	u, err := s.user(w, r)
	if errors.Is(err, account.ErrSessionExpired) {
		return nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "session_expired", Message: err.Error()}
	}
	if err != nil {
		s.log().Error("reading a session", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot check sessions right now; try again shortly")
	}
	t, err := account.PlaygroundToken(r.Context(), s.Logins.Store, u.ID)
	if err != nil {
		s.log().Error("finding the playground token", zap.Error(err))
		return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot prepare the playground right now; try again shortly")
	}
	// the user can disable or expire this key in the console like any
	// other; say which key it is and where to turn it back on
	switch {
	case t.Status != store.TokenEnabled:
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "playground_key_disabled",
			Message: "the playground bills to your key named \"" + t.Name + "\", which is disabled: enable it under API keys on the home page, then send again"}
	case !t.ExpiresAt.IsZero() && time.Now().After(t.ExpiresAt):
		return nil, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "playground_key_expired",
			Message: "the playground bills to your key named \"" + t.Name + "\", which has expired: edit it under API keys on the home page to clear its expiry, then send again"}
	}
	return &keys.Identity{Token: t, User: u}, nil
}

func (s *Sessions) log() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
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

// CheckIdentity refuses disabled or expired tokens and disabled users:
// the one rule for a usable key, for the model endpoints and this API
// alike. Quota is checked once the model, and so the price, is known.
func CheckIdentity(id *keys.Identity) *adapters.Error {
	t, u := id.Token, id.User
	switch {
	case t.Status != store.TokenEnabled:
		return &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "token_disabled",
			Message: "this API key is disabled: ask the gateway's administrator to enable it, or use another key"}
	case !t.ExpiresAt.IsZero() && time.Now().After(t.ExpiresAt):
		return &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "token_expired",
			Message: "this API key expired at " + t.ExpiresAt.UTC().Format(time.RFC3339) + ": create a new one"}
	case u.Status != "" && u.Status != store.UserEnabled:
		return &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "user_disabled",
			Message: "the account this API key belongs to is disabled"}
	}
	return nil
}
