package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateClientSecret implements store.ClientSecretStore. Secrets live in
// the database, so one minted on an instance opens sessions on every
// other.
func (s *Store) CreateClientSecret(ctx context.Context, cs *store.ClientSecret) error {
	ts := now()
	if err := store.PrepareClientSecret(cs, ts); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM client_secrets WHERE expires_at <= $1`, ts.UnixMilli()); err != nil {
			return fmt.Errorf("create client secret: delete expired: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO client_secrets (`+store.ClientSecretColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6)`, cs.IDHash, cs.TokenID, cs.Model, cs.Session, store.Millis(cs.ExpiresAt), store.Millis(cs.CreatedAt)); err != nil {
			return fmt.Errorf("create client secret for token %d: %w", cs.TokenID, sqlErr(err))
		}
		return nil
	})
}

// ClientSecretByHash implements store.ClientSecretStore.
func (s *Store) ClientSecretByHash(ctx context.Context, idHash string) (*store.ClientSecret, error) {
	cs, err := store.ScanClientSecret(s.pool.QueryRow(ctx, `SELECT `+store.ClientSecretColumns+`
		FROM client_secrets WHERE id_hash = $1 AND expires_at > $2`, idHash, now().UnixMilli()))
	if err != nil {
		// never the hash in the message: it names a live secret
		return nil, notFound(err, "client secret")
	}
	return cs, nil
}
