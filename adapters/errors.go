package adapters

import (
	"fmt"
	"net/http"
)

// StatusClientClosed is the status recorded for a request whose client went
// away before the answer was complete (nginx's 499). It is never sent.
const StatusClientClosed = 499

// ErrorType is the kind of an error, in OpenAI's vocabulary; each dialect
// maps it to its own words.
type ErrorType string

// Error types.
const (
	ErrInvalidRequest    ErrorType = "invalid_request_error"
	ErrAuthentication    ErrorType = "authentication_error"
	ErrPermission        ErrorType = "permission_error"
	ErrNotFound          ErrorType = "not_found_error"
	ErrRequestTooLarge   ErrorType = "request_too_large"
	ErrRateLimit         ErrorType = "rate_limit_error"
	ErrInsufficientQuota ErrorType = "insufficient_quota"
	ErrAPI               ErrorType = "api_error"
	ErrOverloaded        ErrorType = "overloaded_error"
)

// Error is a failure with an HTTP status, rendered by each dialect in its
// own shape.
type Error struct {
	Status  int
	Type    ErrorType
	Code    string
	Message string
	Param   string
	// Fault says whose fault an upstream error is when its status alone
	// does not (a 400 for a revoked key, a 402 for the channel's unpaid
	// bill). Each vendor's DecodeError sets it; the relay fails over on
	// FaultChannel and never shows the upstream's words to the client.
	Fault Fault
}

// Fault is whose fault an upstream error is.
type Fault int

// Faults.
const (
	// FaultByStatus: the status says (4xx the request's, 5xx the upstream's).
	FaultByStatus Fault = iota
	// FaultChannel: the upstream refused the channel itself, its key, its
	// account or its quota; the client's request was fine and another
	// channel may serve it.
	FaultChannel
)

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error.
func Errorf(status int, typ ErrorType, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is the common 400.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, ErrInvalidRequest, format, args...)
}

// Unsupported is returned by a provider or dialect that cannot carry an
// operation or a feature.
func Unsupported(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, ErrInvalidRequest, format, args...)
}

// NotFound is a path or model the gateway does not serve.
func NotFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, ErrNotFound, format, args...)
}

// ClientClosed is the error of a request whose client went away.
func ClientClosed() *Error {
	return &Error{Status: StatusClientClosed, Type: ErrAPI, Message: "the client closed the request"}
}

// ErrorTypeForStatus picks the usual Type for a status, for upstream errors
// that do not say.
func ErrorTypeForStatus(status int) ErrorType {
	switch {
	case status == http.StatusUnauthorized:
		return ErrAuthentication
	case status == http.StatusForbidden:
		return ErrPermission
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusRequestEntityTooLarge:
		return ErrRequestTooLarge
	case status == http.StatusTooManyRequests:
		return ErrRateLimit
	case status == 529 || status == http.StatusServiceUnavailable:
		return ErrOverloaded
	case status >= 500:
		return ErrAPI
	default:
		return ErrInvalidRequest
	}
}
