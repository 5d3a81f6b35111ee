package store

import (
	"context"
	"errors"
	"time"
)

// ClientSecret is a short-lived secret a key minted for a browser's
// Realtime session (OpenAI's ephemeral key shape): stored by hash, bound to
// the token that minted it and pays for what it opens, dead after
// ExpiresAt. A row, not a signed token, so that every instance on one
// database knows it at once and its key's changes (disabled, deleted) apply
// to it too.
type ClientSecret struct {
	IDHash  string
	TokenID int64
	// Model, when set, is the only model the secret opens.
	Model string
	// Session is the session configuration (a JSON object) a session the
	// secret opens starts with; "" for none.
	Session   string
	ExpiresAt time.Time
	CreatedAt time.Time
}

// ClientSecretStore keeps Realtime client secrets.
type ClientSecretStore interface {
	// CreateClientSecret stores a secret, setting CreatedAt if zero, and
	// deletes the expired ones on the way (no sweeper is needed); an
	// IDHash already stored is ErrConflict.
	CreateClientSecret(ctx context.Context, cs *ClientSecret) error
	// ClientSecretByHash returns the secret with idHash; ErrNotFound when
	// there is none or it has expired.
	ClientSecretByHash(ctx context.Context, idHash string) (*ClientSecret, error)
}

// PrepareClientSecret checks a secret before it is stored and sets its
// CreatedAt.
func PrepareClientSecret(cs *ClientSecret, now time.Time) error {
	switch {
	case cs.IDHash == "":
		return errors.New("create client secret: empty id hash")
	case cs.TokenID == 0:
		return errors.New("create client secret: no token")
	case cs.ExpiresAt.IsZero():
		return errors.New("create client secret: no expiry")
	}
	if cs.CreatedAt.IsZero() {
		cs.CreatedAt = now
	}
	return nil
}

// ClientSecretColumns are the client_secrets columns ScanClientSecret
// reads, in its order.
const ClientSecretColumns = `id_hash, token_id, model, session, expires_at, created_at`

// ScanClientSecret reads a row of ClientSecretColumns.
func ScanClientSecret(sc RowScanner) (*ClientSecret, error) {
	var (
		cs                   ClientSecret
		expiresAt, createdAt *int64
	)
	if err := sc.Scan(&cs.IDHash, &cs.TokenID, &cs.Model, &cs.Session, &expiresAt, &createdAt); err != nil {
		return nil, err
	}
	cs.ExpiresAt = FromMillis(expiresAt)
	cs.CreatedAt = FromMillis(createdAt)
	return &cs, nil
}
