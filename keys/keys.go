// Package keys issues gateway API keys and recognises them: generation,
// the hash under which a key is stored, and an in-memory cache so that
// authenticating a request costs no database read. It must not import
// caddymodule or any vendor adapter.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
)

const (
	// Prefix starts every gateway key, as OpenAI's keys do, so clients and
	// secret scanners recognise it.
	Prefix    = "sk-"
	keyLength = 48
	alphabet  = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// Generate returns a new random key: "sk-" and 48 base-62 characters
// (about 285 bits of entropy).
func Generate() (string, error) {
	return Random(Prefix, keyLength)
}

// Random returns prefix followed by n random base-62 characters; it also
// makes passwords, redemption codes and session IDs.
func Random(prefix string, n int) (string, error) {
	b := make([]byte, len(prefix)+n)
	copy(b, prefix)
	max := big.NewInt(int64(len(alphabet)))
	for i := len(prefix); i < len(b); i++ {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b), nil
}

// Hash is what the store keeps instead of a key. Keys are long random
// strings, so a fast unsalted hash is enough: there is nothing to guess.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// DisplayPrefix is the part of a key shown to people to tell keys apart.
func DisplayPrefix(key string) string {
	if len(key) > len(Prefix)+6 {
		return key[:len(Prefix)+6]
	}
	return key
}
