package accountapi

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Sign-in beyond a password: reset links, the second step of a login,
// enrolling TOTP and passkeys, and administrators' links to single
// sign-on identities.

// resetPagePath is the console's page a reset link opens; the secret
// travels in the fragment, which no server, proxy or access log sees.
const resetPagePath = "/console/reset"

func (h *Handler) routeSignIn(m *http.ServeMux) {
	m.HandleFunc("POST /api/user/login/second_factor", h.wrap(h.loginSecondFactor))
	m.HandleFunc("POST /api/user/login/passkey/options", h.wrap(h.loginPasskeyOptions))
	m.HandleFunc("POST /api/user/login/passkey", h.wrap(h.loginPasskey))
	m.HandleFunc("POST /api/user/reset_link/check", h.wrap(h.checkResetLink))
	m.HandleFunc("POST /api/user/reset_link", h.wrap(h.useResetLink))
	m.HandleFunc("GET /api/user/second_factor", h.user(h.secondFactors))
	m.HandleFunc("POST /api/user/totp", h.user(h.beginTOTP))
	m.HandleFunc("POST /api/user/totp/confirm", h.user(h.confirmTOTP))
	m.HandleFunc("POST /api/user/totp/disable", h.user(h.disableTOTP))
	m.HandleFunc("POST /api/user/recovery_codes", h.user(h.newRecoveryCodes))
	m.HandleFunc("POST /api/user/passkeys/options", h.user(h.passkeyOptions))
	m.HandleFunc("POST /api/user/passkeys", h.user(h.addPasskey))
	m.HandleFunc("DELETE /api/user/passkeys/{id}", h.user(h.deletePasskey))
	m.HandleFunc("POST /api/admin/users/{id}/reset_link", h.admin(h.issueResetLink))
	m.HandleFunc("GET /api/admin/users/{id}/sign_in", h.admin(h.userSignIn))
	m.HandleFunc("POST /api/admin/users/{id}/sso_link", h.admin(h.linkSSO))
	m.HandleFunc("DELETE /api/admin/users/{id}/sso_link", h.admin(h.unlinkSSO))
	m.HandleFunc("DELETE /api/admin/users/{id}/second_factor", h.admin(h.resetSecondFactors))
}

var (
	errBadSecondFactor = &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "invalid_second_factor",
		msg: account.ErrBadSecondFactor.Error()}
	errPasskeyRefused = &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "passkey_refused",
		msg: account.ErrPasskeyRefused.Error()}
	errEnrolFirst = &apiError{status: http.StatusForbidden, typ: errPermission, code: "second_factor_required",
		msg: "administrators of this gateway sign in with a second factor: set up two-factor codes or a passkey at /console/security, then try again"}
)

// startSession starts the session of a user whose sign-in is complete.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, u *store.User) (any, error) {
	if _, err := h.sessions.start(r.Context(), w, r, u.ID); err != nil {
		return nil, err
	}
	return account.ViewUser(u), nil
}

// secondStepAnswer is a password login's answer when a second factor is
// due: no session yet, a pending login to finish.
type secondStepAnswer struct {
	Required  bool     `json:"second_factor_required"`
	Token     string   `json:"login_token"`
	Methods   []string `json:"methods"`
	ExpiresIn int      `json:"expires_in"` // seconds
}

func (h *Handler) loginSecondFactor(w http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in struct {
		LoginToken string `json:"login_token"`
		Code       string `json:"code"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	u, err := h.gate.SecondStep(r.Context(), h.clientNetwork(r), in.LoginToken, in.Code)
	if err != nil {
		return nil, err
	}
	return h.startSession(w, r, u)
}

// passkeyAnswer is a passkey ceremony's answer from the browser.
type passkeyAnswer struct {
	LoginToken string          `json:"login_token,omitempty"`
	Token      string          `json:"token"`
	Name       string          `json:"name,omitempty"`
	Credential json.RawMessage `json:"credential"`
}

// loginPasskeyOptions starts a passkey check: of a pending login when a
// login_token is given, a sign-in with a passkey alone when not.
func (h *Handler) loginPasskeyOptions(_ http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in struct {
		LoginToken string `json:"login_token"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.LoginToken != "" {
		return h.gate.PasskeySecondStepOptions(r.Context(), h.relyingParty(r), in.LoginToken)
	}
	return h.gate.PasskeySignInOptions(r.Context(), h.clientNetwork(r), h.relyingParty(r))
}

func (h *Handler) loginPasskey(w http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in passkeyAnswer
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	var (
		u   *store.User
		err error
	)
	if in.LoginToken != "" {
		u, err = h.gate.PasskeySecondStep(r.Context(), h.clientNetwork(r), h.relyingParty(r), in.LoginToken, in.Token, in.Credential)
	} else {
		u, err = h.gate.PasskeySignIn(r.Context(), h.clientNetwork(r), h.relyingParty(r), in.Token, in.Credential)
	}
	if err != nil {
		return nil, err
	}
	return h.startSession(w, r, u)
}

// relyingParty is the gateway as this browser reached it, for passkeys:
// the host a trusted proxy was asked for, HTTPS when it says so.
func (h *Handler) relyingParty(r *http.Request) account.RelyingParty {
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
	id := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		id = hn
	}
	return account.RelyingParty{ID: strings.Trim(id, "[]"), Origin: scheme + "://" + host, Name: h.siteName}
}

func (h *Handler) checkResetLink(_ http.ResponseWriter, r *http.Request) (any, error) {
	var in struct {
		Token string `json:"token"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	u, expires, err := h.gate.ResetLinkUser(r.Context(), h.clientNetwork(r), in.Token)
	if err != nil {
		return nil, err
	}
	return map[string]any{"username": u.Username, "expires_at": expires}, nil
}

func (h *Handler) useResetLink(w http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in struct {
		Token    string `json:"token"`
		Password string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	u, err := h.gate.UseResetLink(r.Context(), h.clientNetwork(r), in.Token, in.Password)
	if err != nil {
		return nil, err
	}
	// this browser's own session, if any, ended with the others
	if _, ok := h.sessions.cookie(r); ok {
		h.sessions.setCookie(w, r, "", 0)
	}
	return map[string]string{"username": u.Username}, nil
}

// secondFactorsView is what the security page shows.
type secondFactorsView struct {
	account.SecondFactors
	PasskeyList []store.Passkey `json:"passkey_list"`
	// Required says this account must have a second factor to use the
	// console's administration (require_second_factor admins).
	Required bool `json:"required"`
}

func (h *Handler) secondFactors(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	f, err := account.FactorsOf(r.Context(), h.store, c.user.ID)
	if err != nil {
		return nil, err
	}
	pks, err := h.store.ListPasskeys(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	return secondFactorsView{SecondFactors: f, PasskeyList: pks, Required: h.requireAdmins && account.IsAdmin(c.user)}, nil
}

func (h *Handler) beginTOTP(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	return h.gate.BeginTOTP(r.Context(), c.user, h.siteName)
}

func (h *Handler) confirmTOTP(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Code string `json:"code"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := h.gate.Limit(h.clientNetwork(r), "second factor", c.user.ID); err != nil {
		return nil, err
	}
	codes, err := h.gate.ConfirmTOTP(r.Context(), c.user, in.Code)
	if err != nil {
		return nil, err
	}
	return map[string]any{"recovery_codes": codes}, nil
}

// proof is how a person shows it is them beyond their session.
type proof struct {
	Code     string `json:"code"`
	Password string `json:"password"`
}

func (h *Handler) disableTOTP(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in proof
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := h.gate.DisableTOTP(r.Context(), h.clientNetwork(r), c.user, in.Code, in.Password); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (h *Handler) newRecoveryCodes(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in proof
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	codes, err := h.gate.NewRecoveryCodes(r.Context(), h.clientNetwork(r), c.user, in.Code, in.Password)
	if err != nil {
		return nil, err
	}
	return map[string]any{"recovery_codes": codes}, nil
}

func (h *Handler) passkeyOptions(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	return account.BeginPasskeyRegistration(r.Context(), h.store, h.relyingParty(r), c.user)
}

func (h *Handler) addPasskey(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in passkeyAnswer
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	return account.FinishPasskeyRegistration(r.Context(), h.store, h.relyingParty(r), c.user, in.Token, in.Name, in.Credential)
}

func (h *Handler) deletePasskey(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if err := account.DeletePasskey(r.Context(), h.store, c.user, id); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// issueResetLink makes a reset link for a user; the answer carries the
// link once, as the page's address with the secret in its fragment.
func (h *Handler) issueResetLink(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		TTL string `json:"ttl"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			return nil, err
		}
	}
	ttl := h.resetLinkLifetime
	if in.TTL != "" {
		if ttl, err = time.ParseDuration(in.TTL); err != nil {
			return nil, badRequest("invalid_ttl", "ttl is a duration such as 30m or 24h, not %q", in.TTL)
		}
	}
	link, err := account.IssueResetLink(r.Context(), h.store, c.user, id, ttl)
	if err != nil {
		return nil, err
	}
	path := resetPagePath + "#" + link.Token
	return map[string]any{"url": h.relyingParty(r).Origin + path, "path": path, "expires_at": link.ExpiresAt}, nil
}

func (h *Handler) userSignIn(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if _, err := h.store.UserByID(r.Context(), id); err != nil {
		return nil, err
	}
	f, err := account.FactorsOf(r.Context(), h.store, id)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"second_factors": f, "sso": h.sso != nil}
	if l, err := h.store.SSOLinkByUser(r.Context(), id); err == nil {
		out["sso_link"] = l
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return out, nil
}

func (h *Handler) linkSSO(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Subject string `json:"subject"`
		Email   string `json:"email"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	issuer := ""
	if h.sso != nil {
		issuer = h.sso.Issuer()
	}
	return account.LinkSSO(r.Context(), h.store, c.user, id, issuer, in.Subject, in.Email)
}

func (h *Handler) unlinkSSO(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if err := account.UnlinkSSO(r.Context(), h.store, c.user, id); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (h *Handler) resetSecondFactors(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if err := account.ResetSecondFactors(r.Context(), h.store, c.user, id); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// mustEnrol refuses an administrator's session without a second factor
// when the gateway requires one; a management key, and a session single
// sign-on started (the provider checked its own factors), pass.
func (h *Handler) mustEnrol(r *http.Request, c *caller) error {
	if !h.requireAdmins || c.token != nil || !account.IsAdmin(c.user) {
		return nil
	}
	f, err := account.FactorsOf(r.Context(), h.store, c.user.ID)
	if err != nil || f.Any() {
		return err
	}
	if sc, ok := h.sessions.cookie(r); ok {
		_, err := h.store.Challenge(r.Context(), store.ChallengeSSOSession, keys.Hash(sc.Value))
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return errEnrolFirst
}
