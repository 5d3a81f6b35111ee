// Package sealed encrypts the secrets the gateway keeps in its database
// (vendor keys of channels made at runtime) with the operator's
// secrets_key: AES-256-GCM from the standard library, each secret bound to
// the row it belongs to, so a sealed key copied to another row does not
// open there. It imports nothing of the gateway.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// version is the first byte of everything sealed, so that another scheme
// can be told apart later.
const version = 1

// minKeyLen is the shortest secrets_key accepted: shorter is guessable.
const minKeyLen = 16

// ErrWrongKey is what opening something sealed with another key (or
// changed since) gives.
var ErrWrongKey = errors.New("the secrets_key does not open it: it was sealed with another key (was secrets_key rotated without this configuration following?)")

// Key seals and opens secrets.
type Key struct {
	aead cipher.AEAD
}

// NewKey makes a key of the operator's secrets_key: any string of at least
// 16 characters (leading and trailing space aside, as a file's newline),
// made into an AES-256 key with SHA-256. A random 32-byte value, base64 or
// hex, is what to give.
func NewKey(material string) (*Key, error) {
	material = strings.TrimSpace(material)
	if len(material) < minKeyLen {
		return nil, fmt.Errorf("secrets_key is %d characters: it needs at least %d (make one with: head -c 32 /dev/urandom | base64)", len(material), minKeyLen)
	}
	sum := sha256.Sum256([]byte(material))
	block, err := aes.NewCipher(sum[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// Seal encrypts plain for the row named by bound (its kind and name).
func (k *Key) Seal(plain []byte, bound string) ([]byte, error) {
	out := make([]byte, 1+k.aead.NonceSize(), 1+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	out[0] = version
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("sealing a secret: %w", err)
	}
	return k.aead.Seal(out, out[1:], plain, []byte(bound)), nil
}

// Open decrypts what Seal made for the same bound; ErrWrongKey when this
// key did not seal it (or it was changed).
func (k *Key) Open(sealed []byte, bound string) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < 1+n+k.aead.Overhead() || sealed[0] != version {
		return nil, errors.New("the sealed secret is not in a form this gateway knows")
	}
	plain, err := k.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(bound))
	if err != nil {
		return nil, ErrWrongKey
	}
	return plain, nil
}
