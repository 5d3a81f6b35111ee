package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateToken inserts t and sets its ID, and its CreatedAt if zero. An
// empty Status becomes store.TokenEnabled. A key hash already stored is
// store.ErrConflict; a UserID with no user is store.ErrNotFound.
func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	return insertToken(ctx, s.pool, t)
}

// CreateTokenFrom creates t and takes its quota limit from token
// parentID's, in one transaction; store.ErrInsufficientQuota when the
// parent has too little left. The conditional UPDATE locks the parent's
// row, so two keys made from it at once on any instances cannot both
// take its last units.
func (s *Store) CreateTokenFrom(ctx context.Context, t *store.Token, parentID int64) error {
	if t.QuotaLimit <= 0 {
		return fmt.Errorf("create token from token %d: a positive quota limit is required, not %d", parentID, t.QuotaLimit)
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tokens SET quota_limit = quota_limit - $1
			WHERE id = $2 AND user_id = $3 AND quota_limit > 0
			AND quota_limit - $1 >= used_quota AND quota_limit - $1 >= 1`, t.QuotaLimit, parentID, t.UserID)
		if err != nil {
			return fmt.Errorf("take %d from the limit of token %d: %w", t.QuotaLimit, parentID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("token %d has less than %d left to give: %w", parentID, t.QuotaLimit, store.ErrInsufficientQuota)
		}
		return insertToken(ctx, tx, t)
	})
}

// insertToken inserts t, setting its ID and its defaults.
func insertToken(ctx context.Context, q querier, t *store.Token) error {
	models, err := store.PrepareToken(t, now())
	if err != nil {
		return err
	}
	err = q.QueryRow(ctx, `INSERT INTO tokens (user_id, name, key_hash, key_prefix,
		status, expires_at, quota_limit, used_quota, models, rpm, tpm, max_parallel, created_at, management)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
		t.UserID, t.Name, t.KeyHash, t.KeyPrefix, t.Status, store.Millis(t.ExpiresAt),
		t.QuotaLimit, t.UsedQuota, models, t.Limits.RPM, t.Limits.TPM, t.Limits.MaxParallel,
		store.Millis(t.CreatedAt), t.Management).Scan(&t.ID)
	if err != nil {
		return fmt.Errorf("create token for user %d: %w", t.UserID, sqlErr(err))
	}
	return nil
}

// TokenByHash returns the token whose key hashes to keyHash, or
// store.ErrNotFound. Status and expiry are the caller's to check.
func (s *Store) TokenByHash(ctx context.Context, keyHash string) (*store.Token, error) {
	t, err := store.ScanToken(s.pool.QueryRow(ctx, `SELECT `+store.TokenColumns+` FROM tokens WHERE key_hash = $1`, keyHash))
	if err != nil {
		// Never the hash in the message: it identifies a key.
		return nil, notFound(err, "token")
	}
	return t, nil
}

// TokenByID returns the token with id, or store.ErrNotFound.
func (s *Store) TokenByID(ctx context.Context, id int64) (*store.Token, error) {
	t, err := store.ScanToken(s.pool.QueryRow(ctx, `SELECT `+store.TokenColumns+` FROM tokens WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("token %d", id))
	}
	return t, nil
}

// ListTokens returns a user's tokens, oldest first; an empty, non-nil slice
// when there are none.
func (s *Store) ListTokens(ctx context.Context, userID int64) ([]*store.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+store.TokenColumns+` FROM tokens WHERE user_id = $1 ORDER BY id`, userID)
	return collect(rows, err, store.ScanToken, "list tokens of user %d", userID)
}

// SetTokenStatus sets a token's status, or returns store.ErrNotFound.
func (s *Store) SetTokenStatus(ctx context.Context, id int64, status string) error {
	if status == "" {
		return fmt.Errorf("set status of token %d: empty status", id)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET status = $1 WHERE id = $2`, status, id)
	if err != nil {
		return fmt.Errorf("set status of token %d: %w", id, err)
	}
	return mustAffect(tag, fmt.Sprintf("token %d", id))
}

// UpdateToken writes t's name, status, expiry, quota limit and models. The
// owner is part of the condition, so a token id guessed by another user
// matches no row: store.ErrNotFound.
func (s *Store) UpdateToken(ctx context.Context, t *store.Token) error {
	if t.Status == "" {
		t.Status = store.TokenEnabled
	}
	models, err := store.EncodeModels(t.Models)
	if err != nil {
		return fmt.Errorf("update token %d: %w", t.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET name = $1, status = $2, expires_at = $3,
		quota_limit = $4, models = $5 WHERE id = $6 AND user_id = $7`,
		t.Name, t.Status, store.Millis(t.ExpiresAt), t.QuotaLimit, models, t.ID, t.UserID)
	if err != nil {
		return fmt.Errorf("update token %d: %w", t.ID, err)
	}
	return mustAffect(tag, fmt.Sprintf("token %d", t.ID))
}

// DeleteToken removes token id if userID owns it; store.ErrNotFound if not.
// Usage rows keep the id: they are history.
func (s *Store) DeleteToken(ctx context.Context, userID, id int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tokens WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return fmt.Errorf("delete token %d: %w", id, err)
	}
	return mustAffect(tag, fmt.Sprintf("token %d", id))
}

// SetTokenLimits replaces a token's rate limits, or returns store.ErrNotFound.
func (s *Store) SetTokenLimits(ctx context.Context, id int64, l store.Limits) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET rpm = $1, tpm = $2, max_parallel = $3 WHERE id = $4`,
		l.RPM, l.TPM, l.MaxParallel, id)
	if err != nil {
		return fmt.Errorf("set limits of token %d: %w", id, err)
	}
	return mustAffect(tag, fmt.Sprintf("token %d", id))
}
