package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// GetCachedResponse returns key's unexpired entry and marks it used.
func (s *Store) GetCachedResponse(ctx context.Context, key string, now time.Time) ([]byte, error) {
	var entry []byte
	err := s.r.QueryRowContext(ctx, `SELECT entry FROM response_cache WHERE key = ? AND expires_at > ?`, key, now.UnixMilli()).Scan(&entry)
	if err != nil {
		return nil, notFound(err, "cached response")
	}
	// recency is a hint for eviction: a lost update only ages the entry
	if _, err := s.w.ExecContext(ctx, `UPDATE response_cache SET used_at = ? WHERE key = ? AND used_at < ?`, now.UnixMilli(), key, now.UnixMilli()); err != nil {
		return nil, fmt.Errorf("mark cached response used: %w", err)
	}
	return entry, nil
}

// PutCachedResponse keeps entry and evicts what no longer fits.
func (s *Store) PutCachedResponse(ctx context.Context, key string, entry []byte, expires, now time.Time, maxBytes int64) error {
	if int64(len(entry)) > maxBytes {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO response_cache (key, entry, size, expires_at, used_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET entry = excluded.entry, size = excluded.size, expires_at = excluded.expires_at, used_at = excluded.used_at`,
			key, entry, len(entry), expires.UnixMilli(), now.UnixMilli()); err != nil {
			return fmt.Errorf("keep cached response: %w", err)
		}
		return evictCachedResponses(ctx, tx, now, maxBytes)
	})
}

func evictCachedResponses(ctx context.Context, tx *sql.Tx, now time.Time, maxBytes int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM response_cache WHERE expires_at <= ?`, now.UnixMilli()); err != nil {
		return fmt.Errorf("drop expired cached responses: %w", err)
	}
	// the most recently used entries are kept while their sizes fit
	if _, err := tx.ExecContext(ctx, `DELETE FROM response_cache WHERE key IN (
		SELECT key FROM (SELECT key, SUM(size) OVER (ORDER BY used_at DESC, key) AS running FROM response_cache) WHERE running > ?)`, maxBytes); err != nil {
		return fmt.Errorf("evict cached responses: %w", err)
	}
	return nil
}
