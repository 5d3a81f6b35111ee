package oidc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// sealer encrypts and authenticates the flow a browser carries between
// Start and Finish, so the browser can neither read the PKCE verifier nor
// change the state. Its key comes from the client secret, which every
// instance and every reload of one configuration share: a sign-in started
// on one instance finishes on another, and nothing is kept server-side.
type sealer struct{ aead cipher.AEAD }

func newSealer(secret, context string) *sealer {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("caddy-model-gateway oidc flow\x00" + context))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &sealer{aead: aead}
}

func (s *sealer) seal(v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, nil)), nil
}

var errNotSealed = errors.New("not a value this gateway sealed")

func (s *sealer) open(sealed string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return errNotSealed
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], nil)
	if err != nil {
		return errNotSealed
	}
	return json.Unmarshal(plain, v)
}
