package accountapi

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account/oidc"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Single sign-on is two browser navigations, not API calls: login sends
// the browser to the provider, callback takes it back, starts a session
// and sends it to the console. Their answers are redirects, and a failure
// lands on the console's home page as ?sso_error=<reason>, which the page
// words for the person; the details go to the log only.
const (
	oidcLoginPath    = "/api/user/oidc/login"
	oidcCallbackPath = "/api/user/oidc/callback"
	// ssoErrorParam carries an oidc.Reason back to the console's page.
	ssoErrorParam = "sso_error"
	// flowCookie carries the sealed sign-in between the two legs; over
	// HTTPS with the __Host- prefix, like the session's.
	flowCookie       = "gateway_oidc"
	secureFlowCookie = "__Host-" + flowCookie
)

func (h *Handler) routeSSO(m *http.ServeMux) {
	m.HandleFunc("GET /api/user/sso", h.wrap(h.ssoStatus))
	m.HandleFunc("GET "+oidcLoginPath, h.oidcLogin)
	m.HandleFunc("GET "+oidcCallbackPath, h.oidcCallback)
}

// ssoStatus tells the login page which single sign-on buttons to show.
func (h *Handler) ssoStatus(http.ResponseWriter, *http.Request) (any, error) {
	return map[string]bool{"oidc": h.sso != nil}, nil
}

var errNoSSO = &apiError{status: http.StatusNotFound, typ: errNotFound, code: "sso_not_configured",
	msg: "single sign-on is not configured on this gateway: log in with a username and password"}

func (h *Handler) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if h.sso == nil {
		h.writeError(w, r, errNoSSO)
		return
	}
	authURL, sealed, err := h.sso.Start(r.Context(), h.callbackURL(r))
	if err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: h.flowCookieName(r), Value: sealed, Path: "/", HttpOnly: true,
		// Lax: the provider sends the browser back with a top-level GET
		SameSite: http.SameSiteLaxMode, Secure: h.sessions.Secure(r), MaxAge: 600})
	http.Redirect(w, r, authURL, http.StatusFound)
}

func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if h.sso == nil {
		h.writeError(w, r, errNoSSO)
		return
	}
	// the flow is good for one callback, whatever its outcome
	name := h.flowCookieName(r)
	http.SetCookie(w, &http.Cookie{Name: name, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: h.sessions.Secure(r), MaxAge: -1})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// the provider's own words stay in the log: they are not ours to show
		h.ssoFailed(w, r, &oidc.Failure{Reason: oidc.Denied, Err: errors.New("the provider answered " + e)})
		return
	}
	sealed := ""
	if c, err := r.Cookie(name); err == nil {
		sealed = c.Value
	}
	u, err := h.sso.Finish(r.Context(), sealed, q.Get("state"), q.Get("code"))
	if err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	id, err := h.sessions.start(r.Context(), w, r, u.ID)
	if err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	// the provider answered for the second factor: an administrator this
	// session belongs to is not sent to enrol one here
	if err := h.store.CreateChallenge(r.Context(), &store.Challenge{IDHash: keys.Hash(id), Kind: store.ChallengeSSOSession,
		UserID: u.ID, ExpiresAt: time.Now().Add(h.sessions.Logins.Absolute())}, false); err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	h.log.Info("signed in with single sign-on", zap.Int64("user_id", u.ID), zap.String("username", u.Username))
	http.Redirect(w, r, "/", http.StatusFound)
}

// ssoFailed logs why a sign-in failed and sends the browser to the
// console with the reason for the person.
func (h *Handler) ssoFailed(w http.ResponseWriter, r *http.Request, err error) {
	reason := "internal"
	var f *oidc.Failure
	if errors.As(err, &f) {
		reason = string(f.Reason)
		h.log.Info("single sign-on refused", zap.String("reason", reason), zap.Error(f.Err))
	} else {
		h.log.Error("single sign-on failed", zap.Error(err))
	}
	http.Redirect(w, r, "/?"+ssoErrorParam+"="+url.QueryEscape(reason), http.StatusFound)
}

func (h *Handler) flowCookieName(r *http.Request) string {
	if h.sessions.Secure(r) {
		return secureFlowCookie
	}
	return flowCookie
}

// callbackURL is the callback's address as the browser reaches the
// gateway: HTTPS when the connection or a trusted proxy says so, and the
// host a trusted proxy was asked for.
func (h *Handler) callbackURL(r *http.Request) string {
	scheme := "http"
	if h.sessions.Secure(r) {
		scheme = "https"
	}
	host := r.Host
	if h.sessions.TrustedProxy != nil && h.sessions.TrustedProxy(r) {
		if fh, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ","); strings.TrimSpace(fh) != "" {
			host = strings.TrimSpace(fh)
		}
	}
	return scheme + "://" + host + oidcCallbackPath
}

// StartsSignIn reports whether r begins a single sign-on, whose answer
// sends the browser to the provider with the sign-in's state in the
// address: a log shows that Location redacted.
func StartsSignIn(r *http.Request) bool { return r.URL.Path == oidcLoginPath }

// LoggableQuery is r's query as a log may show it: the sign-in callback's
// authorization code and state, which the provider sends in the query,
// taken out (a code is one exchange away from a session). ok is false
// when r has nothing to take out, and the query may be logged as it is.
func LoggableQuery(r *http.Request) (query string, ok bool) {
	if r.URL.Path != oidcCallbackPath || r.URL.RawQuery == "" {
		return "", false
	}
	q := r.URL.Query()
	if !q.Has("code") && !q.Has("state") {
		return "", false
	}
	q.Del("code")
	q.Del("state")
	return q.Encode(), true
}
