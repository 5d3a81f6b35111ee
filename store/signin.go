package store

import (
	"context"
	"errors"
	"time"
)

// Challenge kinds: what a one-time secret is for.
const (
	// ChallengeReset is an administrator's password reset link.
	ChallengeReset = "reset"
	// ChallengeLogin is a password login waiting for its second factor.
	ChallengeLogin = "login"
	// ChallengePasskeyRegister is a passkey being registered (its Data
	// the ceremony's state).
	ChallengePasskeyRegister = "passkey_register"
	// ChallengePasskeyLogin is a sign-in with a passkey alone.
	ChallengePasskeyLogin = "passkey_login"
	// ChallengeSSOSession marks a session single sign-on started (its
	// IDHash the session's): the provider answered for the second factor.
	ChallengeSSOSession = "sso_session"
)

// Challenge is a one-time secret of a sign-in step, kept by the hash of
// the secret the person carries (in a link, a page's memory), dead after
// ExpiresAt. Data is the step's own state, never a secret of the user's.
type Challenge struct {
	IDHash    string
	Kind      string
	UserID    int64 // 0 when the step does not know its user yet
	Data      string
	ExpiresAt time.Time
	CreatedAt time.Time
}

// TOTP is a user's time-based one-time password secret.
type TOTP struct {
	UserID int64
	// Secret is the base32 key the authenticator app shares.
	Secret string
	// ConfirmedAt is zero while the enrolment waits for its first code.
	ConfirmedAt time.Time
	// LastStep is the last 30-second step a code was taken for.
	LastStep  int64
	CreatedAt time.Time
}

// Passkey is a user's WebAuthn credential.
type Passkey struct {
	ID     int64  `json:"id"`
	UserID int64  `json:"user_id"`
	Name   string `json:"name"`
	// CredentialID is the authenticator's credential id, base64url.
	CredentialID string `json:"-"`
	// Data is the credential as the WebAuthn library keeps it (JSON).
	Data       string    `json:"-"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
}

// SSOLink ties an account to a single sign-on identity at Issuer: the
// provider's Subject, or until its first sign-in only the Email the
// provider vouches for.
type SSOLink struct {
	UserID    int64     `json:"user_id"`
	Issuer    string    `json:"issuer"`
	Subject   string    `json:"subject,omitempty"`
	Email     string    `json:"email,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// SignInStore keeps what sign-in needs beyond a password: one-time
// challenges (reset links, pending logins, passkey ceremonies), TOTP
// secrets and recovery codes, passkeys and single sign-on links.
type SignInStore interface {
	// CreateChallenge stores c, setting CreatedAt if zero, and deletes the
	// expired challenges on the way; with replace, also the user's other
	// challenges of c's kind (one live reset link a user). An IDHash
	// already stored is ErrConflict.
	CreateChallenge(ctx context.Context, c *Challenge, replace bool) error
	// Challenge returns the live challenge of kind with idHash;
	// ErrNotFound when there is none or it has expired.
	Challenge(ctx context.Context, kind, idHash string) (*Challenge, error)
	// TakeChallenge is Challenge that deletes what it returns: a
	// challenge is taken once, however many callers race for it.
	TakeChallenge(ctx context.Context, kind, idHash string) (*Challenge, error)
	// ResetPassword takes the live reset challenge idHash and, in the
	// same transaction, sets its user's password hash and ends every
	// session of theirs; it returns the user's id. ErrNotFound when the
	// link is unknown, used or expired.
	ResetPassword(ctx context.Context, idHash, passwordHash string) (int64, error)

	// SetTOTP stores a new, unconfirmed secret for the user, replacing an
	// unconfirmed one; ErrConflict when a confirmed one exists.
	SetTOTP(ctx context.Context, t *TOTP) error
	// TOTPByUser returns the user's secret; ErrNotFound when none.
	TOTPByUser(ctx context.Context, userID int64) (*TOTP, error)
	// ConfirmTOTP confirms the user's secret at step and replaces their
	// recovery codes with codeHashes, in one transaction; ErrNotFound
	// when there is no unconfirmed secret.
	ConfirmTOTP(ctx context.Context, userID, step int64, codeHashes []string) error
	// UseTOTPStep records that a code of step was taken, only when step
	// is after the last one taken: ErrConflict when it is not (a code is
	// good once), ErrNotFound when the user has no confirmed secret.
	UseTOTPStep(ctx context.Context, userID, step int64) error
	// DeleteTOTP deletes the user's secret and recovery codes.
	DeleteTOTP(ctx context.Context, userID int64) error
	// ReplaceRecoveryCodes replaces the user's recovery codes.
	ReplaceRecoveryCodes(ctx context.Context, userID int64, codeHashes []string) error
	// UseRecoveryCode deletes the user's code with codeHash; ErrNotFound
	// when there is none (never had, or used).
	UseRecoveryCode(ctx context.Context, userID int64, codeHash string) error
	// CountRecoveryCodes is how many unused codes the user has.
	CountRecoveryCodes(ctx context.Context, userID int64) (int, error)

	// AddPasskey stores p, setting its ID and CreatedAt; a credential id
	// already stored is ErrConflict.
	AddPasskey(ctx context.Context, p *Passkey) error
	// ListPasskeys is the user's passkeys, oldest first.
	ListPasskeys(ctx context.Context, userID int64) ([]Passkey, error)
	// PasskeyByCredential returns the passkey with credentialID.
	PasskeyByCredential(ctx context.Context, credentialID string) (*Passkey, error)
	// UsePasskey stores the credential's new data (its sign count) and
	// when it was used.
	UsePasskey(ctx context.Context, id int64, data string) error
	// DeletePasskey deletes the user's passkey id; ErrNotFound when the
	// user has no such passkey.
	DeletePasskey(ctx context.Context, userID, id int64) error

	// LinkSSO links the user to an identity, replacing their link; an
	// identity (issuer and subject, or issuer and pending email) linked
	// to another user is ErrConflict.
	LinkSSO(ctx context.Context, l *SSOLink) error
	// SSOLinkByUser returns the user's link; ErrNotFound when none.
	SSOLinkByUser(ctx context.Context, userID int64) (*SSOLink, error)
	// SSOLinkBySubject returns the link of issuer's subject.
	SSOLinkBySubject(ctx context.Context, issuer, subject string) (*SSOLink, error)
	// ClaimSSOLink gives subject to the link waiting for email's first
	// sign-in at issuer and returns it; ErrNotFound when none waits.
	ClaimSSOLink(ctx context.Context, issuer, email, subject string) (*SSOLink, error)
	// UnlinkSSO deletes the user's link; ErrNotFound when none.
	UnlinkSSO(ctx context.Context, userID int64) error
}

// PrepareChallenge checks a challenge before it is stored and sets its
// CreatedAt.
func PrepareChallenge(c *Challenge, now time.Time) error {
	switch {
	case c.IDHash == "":
		return errors.New("create challenge: empty id hash")
	case c.Kind == "":
		return errors.New("create challenge: no kind")
	case c.ExpiresAt.IsZero():
		return errors.New("create challenge: no expiry")
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	return nil
}

// ChallengeColumns are the signin_challenges columns ScanChallenge reads.
const ChallengeColumns = `id_hash, kind, user_id, data, expires_at, created_at`

// ScanChallenge reads a row of ChallengeColumns.
func ScanChallenge(sc RowScanner) (*Challenge, error) {
	var (
		c                    Challenge
		expiresAt, createdAt *int64
	)
	if err := sc.Scan(&c.IDHash, &c.Kind, &c.UserID, &c.Data, &expiresAt, &createdAt); err != nil {
		return nil, err
	}
	c.ExpiresAt, c.CreatedAt = FromMillis(expiresAt), FromMillis(createdAt)
	return &c, nil
}

// TOTPColumns are the totp_secrets columns ScanTOTP reads.
const TOTPColumns = `user_id, secret, confirmed_at, last_step, created_at`

// ScanTOTP reads a row of TOTPColumns.
func ScanTOTP(sc RowScanner) (*TOTP, error) {
	var (
		t           TOTP
		confirmedAt int64
		createdAt   *int64
	)
	if err := sc.Scan(&t.UserID, &t.Secret, &confirmedAt, &t.LastStep, &createdAt); err != nil {
		return nil, err
	}
	t.ConfirmedAt, t.CreatedAt = FromMillisOrZero(confirmedAt), FromMillis(createdAt)
	return &t, nil
}

// PasskeyColumns are the passkeys columns ScanPasskey reads.
const PasskeyColumns = `id, user_id, credential_id, name, data, created_at, last_used_at`

// ScanPasskey reads a row of PasskeyColumns.
func ScanPasskey(sc RowScanner) (Passkey, error) {
	var (
		p         Passkey
		createdAt *int64
		lastUsed  int64
	)
	if err := sc.Scan(&p.ID, &p.UserID, &p.CredentialID, &p.Name, &p.Data, &createdAt, &lastUsed); err != nil {
		return Passkey{}, err
	}
	p.CreatedAt, p.LastUsedAt = FromMillis(createdAt), FromMillisOrZero(lastUsed)
	return p, nil
}

// SSOLinkColumns are the sso_links columns ScanSSOLink reads.
const SSOLinkColumns = `user_id, issuer, subject, email, created_at`

// ScanSSOLink reads a row of SSOLinkColumns.
func ScanSSOLink(sc RowScanner) (*SSOLink, error) {
	var (
		l         SSOLink
		createdAt *int64
	)
	if err := sc.Scan(&l.UserID, &l.Issuer, &l.Subject, &l.Email, &createdAt); err != nil {
		return nil, err
	}
	l.CreatedAt = FromMillis(createdAt)
	return &l, nil
}
