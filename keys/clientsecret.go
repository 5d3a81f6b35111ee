package keys

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Realtime client secrets are short-lived secrets a key mints for a
// browser, which must never hold the key itself (OpenAI's ephemeral keys:
// POST /v1/realtime/client_secrets). A secret opens Realtime sessions
// only, as the key that minted it: its limits, its models, its quota. It
// is stored by hash (store.ClientSecret), so every instance on one
// database knows it, and a change to its key (disabled, expired, deleted)
// applies to it at once.
const (
	// ClientSecretPrefix starts every client secret, as OpenAI's "ek_", so
	// it is told from a key before any lookup.
	ClientSecretPrefix = "ek_"
	clientSecretLength = 48
)

// IsClientSecret reports whether a credential is a client secret rather
// than a key.
func IsClientSecret(credential string) bool {
	return strings.HasPrefix(credential, ClientSecretPrefix)
}

// MintClientSecret stores a new client secret for the identity's token,
// living ttl, limited to model when it is not "", its sessions starting
// with the session configuration (a JSON object, or ""), and returns it.
// The secret itself is returned once and never stored.
func MintClientSecret(ctx context.Context, st store.ClientSecretStore, id *Identity, model, session string, ttl time.Duration) (string, *store.ClientSecret, error) {
	secret, err := Random(ClientSecretPrefix, clientSecretLength)
	if err != nil {
		return "", nil, fmt.Errorf("mint client secret: %w", err)
	}
	cs := &store.ClientSecret{IDHash: Hash(secret), TokenID: id.Token.ID, Model: model, Session: session, ExpiresAt: time.Now().Add(ttl)}
	if err := st.CreateClientSecret(ctx, cs); err != nil {
		return "", nil, err
	}
	return secret, cs, nil
}

// identityStore is what LookupClientSecret reads.
type identityStore interface {
	store.ClientSecretStore
	TokenByID(ctx context.Context, id int64) (*store.Token, error)
	UserByID(ctx context.Context, id int64) (*store.User, error)
}

// LookupClientSecret finds the live client secret and the identity of the
// key that minted it; ErrUnknownKey for a secret that is unknown or has
// expired, or whose key or user is gone. It reads the store each time: a
// secret opens a session, not a request stream.
func LookupClientSecret(ctx context.Context, st identityStore, secret string) (*Identity, *store.ClientSecret, error) {
	cs, err := st.ClientSecretByHash(ctx, Hash(secret))
	if err != nil {
		return nil, nil, known(err)
	}
	t, err := st.TokenByID(ctx, cs.TokenID)
	if err != nil {
		return nil, nil, known(err)
	}
	u, err := st.UserByID(ctx, t.UserID)
	if err != nil {
		return nil, nil, known(err)
	}
	return &Identity{Token: t, User: u}, cs, nil
}

// known is ErrUnknownKey for a missing row, err otherwise.
func known(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrUnknownKey
	}
	return err
}
