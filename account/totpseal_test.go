package account

import (
	"errors"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/sealed"
)

// TestTOTPSealing: a secret sealed for one user opens only for that user
// and only with its key; a plain one (kept before secrets_key) reads as it
// is and is sealed by a rotation; a sealed one with no key set says so.
func TestTOTPSealing(t *testing.T) {
	key, _ := sealed.NewKey("totp-sealing-key-0123456789")
	other, _ := sealed.NewKey("another-sealing-key-0123456789")
	const secret = "JBSWY3DPEHPK3PXP"
	stored, err := sealTOTP(key, 7, secret)
	if err != nil || !strings.HasPrefix(stored, sealedTOTPPrefix) || strings.Contains(stored, secret) {
		t.Fatalf("sealed %q, %v", stored, err)
	}
	if got, err := openTOTP(key, 7, stored); err != nil || got != secret {
		t.Fatalf("opened %q, %v", got, err)
	}
	if _, err := openTOTP(key, 8, stored); !errors.Is(err, sealed.ErrWrongKey) {
		t.Fatalf("another user's row: %v, want ErrWrongKey", err)
	}
	if _, err := openTOTP(other, 7, stored); !errors.Is(err, sealed.ErrWrongKey) {
		t.Fatalf("another key: %v, want ErrWrongKey", err)
	}
	if _, err := openTOTP(nil, 7, stored); !errors.Is(err, ErrTOTPSealedNoKey) {
		t.Fatalf("no key: %v, want ErrTOTPSealedNoKey", err)
	}
	if got, err := openTOTP(nil, 7, secret); err != nil || got != secret {
		t.Fatalf("a plain secret: %q, %v", got, err)
	}
	if plain, err := sealTOTP(nil, 7, secret); err != nil || plain != secret {
		t.Fatalf("no key seals nothing: %q, %v", plain, err)
	}
	// rotation: sealed under key -> under other; plain -> under other
	for _, from := range []string{stored, secret} {
		next, err := ResealTOTP(key, other, 7, from)
		if err != nil || next == from {
			t.Fatalf("reseal of %q: %q, %v", from, next, err)
		}
		if got, err := openTOTP(other, 7, next); err != nil || got != secret {
			t.Fatalf("after reseal: %q, %v", got, err)
		}
	}
	if _, err := ResealTOTP(other, key, 7, stored); !errors.Is(err, sealed.ErrWrongKey) {
		t.Fatalf("a wrong old key: %v, want ErrWrongKey", err)
	}
}
