package account

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"image/png"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Two-factor sign-in: a password login of a user with a second factor
// (a confirmed TOTP secret, a passkey) does not start a session. It gets a
// short-lived pending login, whose secret the page keeps and sends back
// with a code, a recovery code or a passkey's assertion; only then is the
// session started. Single sign-on relies on the provider's own factors.

// pendingLoginLifetime is how long a password login waits for its second
// factor: long enough to find the phone.
const pendingLoginLifetime = 5 * time.Minute

// totpPeriod and totpSkew are the authenticator apps' defaults: 30-second
// steps, and one step either side for a clock that drifted.
const (
	totpPeriod = 30
	totpSkew   = 1
)

// recoveryCodeCount recovery codes are given at once, each good once.
const recoveryCodeCount = 10

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// SecondFactors are what a user has beyond a password.
type SecondFactors struct {
	TOTP          bool `json:"totp"`
	TOTPPending   bool `json:"totp_pending,omitempty"` // enrolment waits for its first code
	RecoveryCodes int  `json:"recovery_codes"`
	Passkeys      int  `json:"passkeys"`
}

// Any reports whether a password login needs a second step.
func (f SecondFactors) Any() bool { return f.TOTP || f.Passkeys > 0 }

// FactorsOf reads the user's second factors.
func FactorsOf(ctx context.Context, st store.Store, userID int64) (SecondFactors, error) {
	var f SecondFactors
	t, err := st.TOTPByUser(ctx, userID)
	switch {
	case err == nil:
		f.TOTP, f.TOTPPending = !t.ConfirmedAt.IsZero(), t.ConfirmedAt.IsZero()
	case !errors.Is(err, store.ErrNotFound):
		return f, err
	}
	if f.RecoveryCodes, err = st.CountRecoveryCodes(ctx, userID); err != nil {
		return f, err
	}
	pk, err := st.ListPasskeys(ctx, userID)
	if err != nil {
		return f, err
	}
	f.Passkeys = len(pk)
	return f, nil
}

// TOTPEnrolment is a new secret as the person's app takes it: the
// otpauth:// URI, the same as a QR code (a PNG data URL), and the secret
// to type. Shown once; the store keeps the secret to check codes.
type TOTPEnrolment struct {
	Secret string `json:"secret"`
	URI    string `json:"uri"`
	QR     string `json:"qr"`
}

// BeginTOTP makes a new secret for u, replacing an enrolment not yet
// confirmed; a user whose TOTP is on must turn it off first. issuer names
// the gateway in the person's app. The store keeps the secret sealed when
// the gate has a secrets_key.
func (g *Gate) BeginTOTP(ctx context.Context, u *store.User, issuer string) (*TOTPEnrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: u.Username, Period: totpPeriod,
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Rand: rand.Reader})
	if err != nil {
		return nil, fmt.Errorf("making a totp secret: %w", err)
	}
	stored, err := sealTOTP(g.secrets, u.ID, key.Secret())
	if err != nil {
		return nil, err
	}
	if err := g.store.SetTOTP(ctx, &store.TOTP{UserID: u.ID, Secret: stored}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, invalidf("totp_enabled", "two-factor codes are already on for this account: turn them off first to enrol another app")
		}
		return nil, err
	}
	img, err := key.Image(240, 240)
	if err != nil {
		return nil, fmt.Errorf("drawing the totp qr code: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encoding the totp qr code: %w", err)
	}
	return &TOTPEnrolment{Secret: key.Secret(), URI: key.URL(),
		QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}

// ErrBadSecondFactor is one answer for a wrong, used or stale code.
var ErrBadSecondFactor = errors.New("the code is wrong or was used already: enter the current code from your authenticator app, or a recovery code")

// totpStep returns the step code is right for at now (within the skew),
// comparing in constant time.
func totpStep(secret, code string, now time.Time) (int64, bool) {
	code = strings.ReplaceAll(strings.TrimSpace(code), " ", "")
	if len(code) != 6 {
		return 0, false
	}
	for d := -totpSkew; d <= totpSkew; d++ {
		at := now.Add(time.Duration(d*totpPeriod) * time.Second)
		want, err := totp.GenerateCodeCustom(secret, at, totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return at.Unix() / totpPeriod, true
		}
	}
	return 0, false
}

// ConfirmTOTP turns u's enrolled secret on with its first code and
// returns the recovery codes, shown once.
func (g *Gate) ConfirmTOTP(ctx context.Context, u *store.User, code string) ([]string, error) {
	st := g.store
	t, err := st.TOTPByUser(ctx, u.ID)
	if errors.Is(err, store.ErrNotFound) || err == nil && !t.ConfirmedAt.IsZero() {
		return nil, invalidf("no_totp_enrolment", "there is no enrolment waiting for a code: start one first")
	}
	if err != nil {
		return nil, err
	}
	secret, err := openTOTP(g.secrets, u.ID, t.Secret)
	if err != nil {
		return nil, err
	}
	step, ok := totpStep(secret, code, time.Now())
	if !ok {
		return nil, invalidf("invalid_code", "the code does not match: check the app's clock and enter the code it shows now")
	}
	codes, hashes, err := newRecoveryCodes()
	if err != nil {
		return nil, err
	}
	if err := st.ConfirmTOTP(ctx, u.ID, step, hashes); err != nil {
		return nil, err
	}
	if err := Audit(ctx, st, u, AuditTOTPEnable, UserTarget(u.ID), nil, Fields{"totp": true, "recovery_codes": len(codes)}); err != nil {
		return nil, err
	}
	return codes, nil
}

// newRecoveryCodes makes a set of recovery codes and their hashes.
func newRecoveryCodes() (codes, hashes []string, err error) {
	for range recoveryCodeCount {
		r, err := keys.Random("", 12)
		if err != nil {
			return nil, nil, err
		}
		r = strings.ToLower(r)
		codes = append(codes, r[:4]+"-"+r[4:8]+"-"+r[8:])
		hashes = append(hashes, recoveryHash(r))
	}
	return codes, hashes, nil
}

// recoveryHash hashes a code as typed, dashes, spaces and case aside.
func recoveryHash(code string) string {
	code = strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(code)))
	return keys.Hash("recovery:" + code)
}

// checkSecondFactor checks a TOTP code or a recovery code of u: a code
// is good once (its step is recorded, a recovery code deleted).
func (g *Gate) checkSecondFactor(ctx context.Context, u *store.User, code string) error {
	st := g.store
	code = strings.TrimSpace(code)
	if code == "" {
		return ErrBadSecondFactor
	}
	t, err := st.TOTPByUser(ctx, u.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// a secret this configuration cannot open (its secrets_key removed or
	// wrong) still lets a recovery code through; a code that is none is
	// then answered with why the secret did not open, for the log
	var openErr error
	if err == nil && !t.ConfirmedAt.IsZero() {
		if secret, err := openTOTP(g.secrets, u.ID, t.Secret); err != nil {
			openErr = err
		} else if step, ok := totpStep(secret, code, time.Now()); ok {
			err := st.UseTOTPStep(ctx, u.ID, step)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				return ErrBadSecondFactor
			}
			return err
		}
	}
	err = st.UseRecoveryCode(ctx, u.ID, recoveryHash(code))
	if errors.Is(err, store.ErrNotFound) {
		if openErr != nil {
			return openErr
		}
		return ErrBadSecondFactor
	}
	return err
}

// DisableTOTP turns u's codes off, proven with a current code, a recovery
// code or the password, and deletes the recovery codes with it.
func (g *Gate) DisableTOTP(ctx context.Context, network string, u *store.User, code, password string) error {
	if err := g.Limit(network, "second factor", u.ID); err != nil {
		return err
	}
	if err := g.proveSelf(ctx, u, code, password); err != nil {
		return err
	}
	if err := g.store.DeleteTOTP(ctx, u.ID); err != nil {
		return err
	}
	return Audit(ctx, g.store, u, AuditTOTPDisable, UserTarget(u.ID), Fields{"totp": true}, Fields{"totp": false})
}

// NewRecoveryCodes replaces u's recovery codes, proven as DisableTOTP.
func (g *Gate) NewRecoveryCodes(ctx context.Context, network string, u *store.User, code, password string) ([]string, error) {
	if err := g.Limit(network, "second factor", u.ID); err != nil {
		return nil, err
	}
	f, err := FactorsOf(ctx, g.store, u.ID)
	if err != nil {
		return nil, err
	}
	if !f.TOTP {
		return nil, invalidf("totp_disabled", "recovery codes come with two-factor codes: turn them on first")
	}
	if err := g.proveSelf(ctx, u, code, password); err != nil {
		return nil, err
	}
	codes, hashes, err := newRecoveryCodes()
	if err != nil {
		return nil, err
	}
	return codes, g.store.ReplaceRecoveryCodes(ctx, u.ID, hashes)
}

// proveSelf checks that the person is u beyond their session: the
// password, or a second factor's code.
func (g *Gate) proveSelf(ctx context.Context, u *store.User, code, password string) error {
	switch {
	case password != "":
		if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
			return invalidf("invalid_password", "the password is wrong")
		}
		return nil
	case code != "":
		if err := g.checkSecondFactor(ctx, u, code); err != nil {
			if errors.Is(err, ErrBadSecondFactor) {
				return invalidf("invalid_code", "%s", err.Error())
			}
			return err
		}
		return nil
	}
	return invalidf("invalid_request", "send the current code from your authenticator app as code, or your password as password")
}

// PendingLogin is a password login waiting for its second factor.
type PendingLogin struct {
	Token   string        `json:"login_token"`
	Methods []string      `json:"methods"` // totp, recovery_code, passkey
	Expires time.Duration `json:"-"`
}

// StartSecondStep keeps u's right password as a pending login when u has
// a second factor, and returns nil when a session may start at once.
func (g *Gate) StartSecondStep(ctx context.Context, u *store.User) (*PendingLogin, error) {
	f, err := FactorsOf(ctx, g.store, u.ID)
	if err != nil || !f.Any() {
		return nil, err
	}
	token, err := keys.Random("", sessionIDLength)
	if err != nil {
		return nil, err
	}
	if err := g.store.CreateChallenge(ctx, &store.Challenge{IDHash: keys.Hash(token), Kind: store.ChallengeLogin, UserID: u.ID,
		ExpiresAt: time.Now().Add(pendingLoginLifetime)}, false); err != nil {
		return nil, err
	}
	p := &PendingLogin{Token: token, Expires: pendingLoginLifetime}
	if f.TOTP {
		p.Methods = append(p.Methods, "totp", "recovery_code")
	}
	if f.Passkeys > 0 {
		p.Methods = append(p.Methods, "passkey")
	}
	return p, nil
}

// ErrLoginExpired means a pending login is unknown, used or too old.
var ErrLoginExpired = &InputError{Code: "login_expired",
	Msg: "the sign-in waited too long for its second factor, or was finished already: log in with your password again"}

// PendingUser returns the user of a live pending login.
func (g *Gate) PendingUser(ctx context.Context, token string) (*store.User, *store.Challenge, error) {
	if token == "" {
		return nil, nil, ErrLoginExpired
	}
	c, err := g.store.Challenge(ctx, store.ChallengeLogin, keys.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, ErrLoginExpired
	}
	if err != nil {
		return nil, nil, err
	}
	u, err := g.store.UserByID(ctx, c.UserID)
	if errors.Is(err, store.ErrNotFound) || err == nil && u.Status != store.UserEnabled {
		return nil, nil, ErrLoginExpired
	}
	return u, c, err
}

// SecondStep finishes a pending login from network with a TOTP or
// recovery code. Attempts count as a password's do, per address and per
// user, so a stolen password does not buy unlimited guesses at the code;
// the pending login is taken once, on success.
func (g *Gate) SecondStep(ctx context.Context, network, token, code string) (*store.User, error) {
	u, _, err := g.PendingUser(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := g.Limit(network, "second factor", u.ID); err != nil {
		return nil, err
	}
	if err := g.checkSecondFactor(ctx, u, code); err != nil {
		return nil, err
	}
	return u, g.FinishPending(ctx, token)
}

// FinishPending takes a pending login whose second factor was checked.
func (g *Gate) FinishPending(ctx context.Context, token string) error {
	_, err := g.store.TakeChallenge(ctx, store.ChallengeLogin, keys.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return ErrLoginExpired
	}
	return err
}

// ResetSecondFactors clears user id's TOTP, recovery codes and passkeys,
// as actor (a lost phone): the same rule as a password reset.
func ResetSecondFactors(ctx context.Context, st store.Store, actor *store.User, id int64) error {
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return err
	}
	if err := mayResetSignIn(actor, target); err != nil {
		return err
	}
	before, err := FactorsOf(ctx, st, id)
	if err != nil {
		return err
	}
	if err := st.DeleteTOTP(ctx, id); err != nil {
		return err
	}
	pks, err := st.ListPasskeys(ctx, id)
	if err != nil {
		return err
	}
	for _, p := range pks {
		if err := st.DeletePasskey(ctx, id, p.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return Audit(ctx, st, actor, AuditFactorsReset, UserTarget(id),
		Fields{"totp": before.TOTP, "passkeys": before.Passkeys}, Fields{"totp": false, "passkeys": 0})
}
