package account

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A TOTP secret is what a person's authenticator app makes codes from:
// whoever reads it from the database can make them too, so with the
// gateway's secrets_key set it is kept sealed (AES-256-GCM, bound to its
// user, as channels' vendor keys are), and without one as it is.

// SecretSealer seals and opens a secret bound to the row it belongs to:
// the gateway's secrets_key (internal/sealed.Key).
type SecretSealer interface {
	Seal(plain []byte, bound string) ([]byte, error)
	Open(sealed []byte, bound string) ([]byte, error)
}

// sealedTOTPPrefix marks a stored secret sealed with secrets_key. A plain
// one is base32 (A-Z, 2-7), which holds no colon.
const sealedTOTPPrefix = "sealed:"

// ErrTOTPSealedNoKey is opening a sealed secret with no secrets_key set.
var ErrTOTPSealedNoKey = errors.New("the account's two-factor secret is sealed with a secrets_key, and this configuration sets none: give the gateway its secrets_key again")

func totpBinding(userID int64) string { return "totp:" + strconv.FormatInt(userID, 10) }

// sealTOTP is what the store keeps of user userID's secret: sealed with
// key, or as it is when key is nil.
func sealTOTP(key SecretSealer, userID int64, secret string) (string, error) {
	if key == nil {
		return secret, nil
	}
	b, err := key.Seal([]byte(secret), totpBinding(userID))
	if err != nil {
		return "", fmt.Errorf("sealing the totp secret of user %d: %w", userID, err)
	}
	return sealedTOTPPrefix + base64.RawStdEncoding.EncodeToString(b), nil
}

// openTOTP is the secret user userID's stored value holds.
func openTOTP(key SecretSealer, userID int64, stored string) (string, error) {
	enc, ok := strings.CutPrefix(stored, sealedTOTPPrefix)
	if !ok {
		return stored, nil // kept before secrets_key was set
	}
	if key == nil {
		return "", ErrTOTPSealedNoKey
	}
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("the totp secret of user %d: %w", userID, err)
	}
	plain, err := key.Open(b, totpBinding(userID))
	if err != nil {
		return "", fmt.Errorf("the totp secret of user %d: %w", userID, err)
	}
	return string(plain), nil
}

// ResealTOTP is what user userID's stored secret becomes when secrets_key
// changes from oldKey to newKey: opened with oldKey and sealed with newKey,
// or sealed with newKey when it was kept plain (before secrets_key was
// set). A sealed secret oldKey does not open is an error.
func ResealTOTP(oldKey, newKey SecretSealer, userID int64, stored string) (string, error) {
	plain, err := openTOTP(oldKey, userID, stored)
	if err != nil {
		return "", err
	}
	return sealTOTP(newKey, userID, plain)
}
