package account

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// TokenSpec is what a person chooses about a new or changed API key.
type TokenSpec struct {
	Name       string
	QuotaLimit int64     // 0: only the user's quota applies
	Models     []string  // empty: every model
	ExpiresAt  time.Time // zero: never
	Limits     store.Limits
}

func (s *TokenSpec) check() error {
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" {
		s.Name = "default"
	}
	if utf8.RuneCountInString(s.Name) > maxTokenName {
		return inputErrorf("token name must be at most %d characters", maxTokenName)
	}
	if s.QuotaLimit < 0 {
		return inputErrorf("token quota must not be negative (0 means no limit of its own)")
	}
	var models []string
	for _, m := range s.Models {
		if m = strings.TrimSpace(m); m != "" {
			models = append(models, m)
		}
	}
	s.Models = models
	return nil
}

func checkExpiry(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		return inputErrorf("token expiry must be in the future")
	}
	return nil
}

// CreateToken issues an API key for userID and returns the key, which is
// not stored and so can be shown only this once.
func CreateToken(ctx context.Context, st store.Store, userID int64, spec TokenSpec) (string, *store.Token, error) {
	if err := spec.check(); err != nil {
		return "", nil, err
	}
	if err := checkExpiry(spec.ExpiresAt); err != nil {
		return "", nil, err
	}
	key, err := keys.Generate()
	if err != nil {
		return "", nil, err
	}
	t := &store.Token{UserID: userID, Name: spec.Name, KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key),
		QuotaLimit: spec.QuotaLimit, Models: spec.Models, ExpiresAt: spec.ExpiresAt, Limits: spec.Limits}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return key, t, nil
}

// UpdateToken applies spec and status to a token userID owns;
// store.ErrNotFound when there is no such token of theirs.
func UpdateToken(ctx context.Context, st store.Store, userID, id int64, spec TokenSpec, status string) (*store.Token, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if status != store.TokenEnabled && status != store.TokenDisabled {
		return nil, inputErrorf("token status must be enabled or disabled, not %q", status)
	}
	t, err := OwnToken(ctx, st, userID, id)
	if err != nil {
		return nil, err
	}
	// an expired token can still be renamed or disabled; a new expiry must
	// be ahead
	if !spec.ExpiresAt.Equal(t.ExpiresAt) {
		if err := checkExpiry(spec.ExpiresAt); err != nil {
			return nil, err
		}
	}
	t.Name, t.QuotaLimit, t.Models, t.ExpiresAt, t.Status = spec.Name, spec.QuotaLimit, spec.Models, spec.ExpiresAt, status
	if err := st.UpdateToken(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// OwnToken returns userID's token id; store.ErrNotFound for anyone
// else's, so another user's token looks exactly like a missing one.
func OwnToken(ctx context.Context, st store.Store, userID, id int64) (*store.Token, error) {
	t, err := st.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.UserID != userID {
		return nil, fmt.Errorf("token %d: %w", id, store.ErrNotFound)
	}
	return t, nil
}

// DeleteToken removes userID's token id and returns it, so the caller can
// drop it from caches.
func DeleteToken(ctx context.Context, st store.Store, userID, id int64) (*store.Token, error) {
	t, err := OwnToken(ctx, st, userID, id)
	if err != nil {
		return nil, err
	}
	if err := st.DeleteToken(ctx, userID, id); err != nil {
		return nil, err
	}
	return t, nil
}
