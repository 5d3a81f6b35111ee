package accountapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

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
		msg: "log in first (POST /api/user/login), or send a management key as 'Authorization: Bearer sk-...'"}
	errNotManagementKey = &apiError{status: http.StatusForbidden, typ: errPermission, code: "management_key_required",
		msg: "this API key reaches the model and task endpoints only: sign in (POST /api/user/login), or send a management key, which a signed-in user makes with {\"management\": true} (POST /api/user/tokens)"}
	errNotAdmin = &apiError{status: http.StatusForbidden, typ: errPermission, code: "admin_only",
		msg: "this needs an administrator's account"}
	errCrossSite = &apiError{status: http.StatusForbidden, typ: errPermission, code: "cross_origin",
		msg: "requests that change an account with the session cookie must come from the gateway's own pages with 'Content-Type: application/json'; other clients send a management key as 'Authorization: Bearer sk-...'"}
	errBadCredentials = &apiError{status: http.StatusUnauthorized, typ: errAuthentication, code: "invalid_credentials",
		msg: "wrong username or password"}
)

// asAPIError puts the account package's refusals in the API's terms.
func asAPIError(err error) (*apiError, bool) {
	var (
		ae  *apiError
		ie  *account.InputError
		ref *account.Refusal
	)
	switch {
	case errors.As(err, &ae):
		return ae, true
	case errors.As(err, new(*Refusal)):
		return refusalError(err)
	case errors.As(err, &ie):
		return badRequest(codeOrInvalid(ie.Code), "%s", ie.Msg), true
	case errors.As(err, &ref) && ref.Reason == account.TooManyAttempts:
		return &apiError{status: http.StatusTooManyRequests, typ: errRateLimit, code: ref.Code, msg: ref.Msg, retryAfter: ref.RetryAfter}, true
	case errors.As(err, &ref):
		return &apiError{status: http.StatusForbidden, typ: errPermission, code: ref.Code, msg: ref.Msg}, true
	case errors.Is(err, account.ErrBadCredentials):
		return errBadCredentials, true
	case errors.Is(err, account.ErrBadSecondFactor):
		return errBadSecondFactor, true
	case errors.Is(err, account.ErrPasskeyRefused):
		return errPasskeyRefused, true
	case errors.Is(err, account.ErrCodeRefused):
		return badRequest("invalid_redemption_code", "%s", err.Error()), true
	case errors.Is(err, store.ErrNotFound):
		return &apiError{status: http.StatusNotFound, typ: errNotFound, code: "not_found", msg: "no such item of yours: check the id"}, true
	}
	return nil, false
}

func codeOrInvalid(code string) string {
	if code == "" {
		return "invalid_request"
	}
	return code
}

func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae, ok := asAPIError(err)
	if !ok {
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

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("invalid_id", "the id in the path must be a positive integer, not %q", r.PathValue("id"))
	}
	return id, nil
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

// dollars writes units as US dollars for a message a person reads: whole
// cents always, sub-cent digits when there are any ($0.000034).
func dollars(units int64) string {
	sign := ""
	if units < 0 {
		sign, units = "-", -units
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", units%billing.UnitsPerUSD), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s$%d.%s", sign, units/billing.UnitsPerUSD, frac)
}
