package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateClientSecret implements store.ClientSecretStore.
func (s *Store) CreateClientSecret(ctx context.Context, cs *store.ClientSecret) error {
	ts := now()
	if err := store.PrepareClientSecret(cs, ts); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM client_secrets WHERE expires_at <= ?`, ts.UnixMilli()); err != nil {
			return fmt.Errorf("create client secret: delete expired: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO client_secrets (`+store.ClientSecretColumns+`)
			VALUES (?, ?, ?, ?, ?, ?)`, cs.IDHash, cs.TokenID, cs.Model, cs.Session, store.Millis(cs.ExpiresAt), store.Millis(cs.CreatedAt)); err != nil {
			return fmt.Errorf("create client secret for token %d: %w", cs.TokenID, sqlErr(err))
		}
		return nil
	})
}

// ClientSecretByHash implements store.ClientSecretStore.
func (s *Store) ClientSecretByHash(ctx context.Context, idHash string) (*store.ClientSecret, error) {
	cs, err := store.ScanClientSecret(s.r.QueryRowContext(ctx, `SELECT `+store.ClientSecretColumns+`
		FROM client_secrets WHERE id_hash = ? AND expires_at > ?`, idHash, now().UnixMilli()))
	if err != nil {
		// never the hash in the message: it names a live secret
		return nil, notFound(err, "client secret")
	}
	return cs, nil
}
