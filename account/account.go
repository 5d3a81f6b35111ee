// Package account is the gateway's account policy, shared by the web API
// and the CLI: who may do what (roles and grants), creating and
// registering users, password and username rules, sessions, API keys,
// redemption codes, quota adjustments and their invitation rewards, the
// playground key, and the limiter that slows guessing at logins, codes
// and signups. It checks what a person asked for and turns it into store
// calls, an administrator's change into one store transaction.
//
// It knows nothing of HTTP, cookies or flags, and must not import Caddy:
// its errors (InputError, Refusal) say what to fix without naming either,
// and the caller writes them in its own dialect.
package account

import (
	"fmt"
	"time"
)

// InputError is a refusal of what the caller typed; its message is meant
// for the person who asked. Code is a short machine-readable reason
// ("invalid_status"); empty means the generic "invalid_request".
type InputError struct {
	Code string
	Msg  string
}

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

func invalidf(code, format string, args ...any) error {
	return &InputError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Reason is why a Refusal refuses.
type Reason int

const (
	// Forbidden: the caller is known but may not do this.
	Forbidden Reason = iota + 1
	// TooManyAttempts: the limiter refuses until RetryAfter has passed.
	TooManyAttempts
)

// Refusal is a well-formed request the caller may not make, now or at
// all. Code is a short machine-readable reason ("role_not_allowed").
type Refusal struct {
	Reason     Reason
	Code       string
	Msg        string
	RetryAfter time.Duration
}

func (e *Refusal) Error() string { return e.Msg }

func forbidden(code, msg string) error {
	return &Refusal{Reason: Forbidden, Code: code, Msg: msg}
}

// Limits on what people type.
const (
	MinPassword    = 8
	maxPassword    = 72 // bcrypt ignores what follows
	maxUsername    = 64
	maxTokenName   = 64
	MaxCodesAtOnce = 10000
	inviteCodeLen  = 10
	codeLen        = 32
)
