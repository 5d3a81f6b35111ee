package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// GetCachedResponse returns key's unexpired entry and marks it used.
func (s *Store) GetCachedResponse(ctx context.Context, key string, now time.Time) ([]byte, error) {
	var entry []byte
	err := s.pool.QueryRow(ctx, `UPDATE response_cache SET used_at = GREATEST(used_at, $2)
		WHERE key = $1 AND expires_at > $2 RETURNING entry`, key, now.UnixMilli()).Scan(&entry)
	if err != nil {
		return nil, notFound(err, "cached response")
	}
	return entry, nil
}

// PutCachedResponse keeps entry and evicts what no longer fits. Two
// instances evicting at once may both delete: the bound holds either way.
func (s *Store) PutCachedResponse(ctx context.Context, key string, entry []byte, expires, now time.Time, maxBytes int64) error {
	if int64(len(entry)) > maxBytes {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO response_cache (key, entry, size, expires_at, used_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (key) DO UPDATE SET entry = excluded.entry, size = excluded.size, expires_at = excluded.expires_at, used_at = excluded.used_at`,
			key, entry, len(entry), expires.UnixMilli(), now.UnixMilli()); err != nil {
			return fmt.Errorf("keep cached response: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM response_cache WHERE expires_at <= $1`, now.UnixMilli()); err != nil {
			return fmt.Errorf("drop expired cached responses: %w", err)
		}
		// the most recently used entries are kept while their sizes fit
		if _, err := tx.Exec(ctx, `DELETE FROM response_cache WHERE key IN (
			SELECT key FROM (SELECT key, SUM(size) OVER (ORDER BY used_at DESC, key) AS running FROM response_cache) AS r WHERE running > $1)`, maxBytes); err != nil {
			return fmt.Errorf("evict cached responses: %w", err)
		}
		return nil
	})
}
