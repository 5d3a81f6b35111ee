package account

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Management lets the key reach the account and admin API as its
	// owner's login does; only a signed-in user makes one.
	Management bool
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
		QuotaLimit: spec.QuotaLimit, Models: spec.Models, ExpiresAt: spec.ExpiresAt, Limits: spec.Limits,
		Management: spec.Management}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return key, t, nil
}

// CreateTokenFrom is CreateToken for a key a limited management key makes:
// the new key's quota limit is taken from parent's, in the same
// transaction, so the keys it makes cannot together spend more than it
// had left.
func CreateTokenFrom(ctx context.Context, st store.Store, parent *store.Token, spec TokenSpec) (string, *store.Token, error) {
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
	t := &store.Token{UserID: parent.UserID, Name: spec.Name, KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key),
		QuotaLimit: spec.QuotaLimit, Models: spec.Models, ExpiresAt: spec.ExpiresAt, Limits: spec.Limits,
		Management: spec.Management}
	err = st.CreateTokenFrom(ctx, t, parent.ID)
	if errors.Is(err, store.ErrInsufficientQuota) {
		return "", nil, forbidden("key_too_wide", fmt.Sprintf("the management key you sent has too little quota left to give %d units "+
			"(it keeps at least 1 unit of its own limit): ask for less, or sign in to the console to make a wider key", spec.QuotaLimit))
	}
	if err != nil {
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

// SpecOf is what t is, as a TokenSpec.
func SpecOf(t *store.Token) TokenSpec {
	return TokenSpec{Name: t.Name, QuotaLimit: t.QuotaLimit, Models: t.Models, ExpiresAt: t.ExpiresAt,
		Limits: t.Limits, Management: t.Management}
}

// KeyWithin refuses a key spec that would reach beyond key, the
// management key a request came with: no key makes or changes a key
// wider than itself, so a key handed out with a quota, some models or an
// expiry cannot mint an unlimited one or lift its own limits. used is
// what the key spec describes has spent already (0 for a new key): a
// limited key may give at most what it has left (CreateTokenFrom then
// takes it from its limit, so its keys together have no more).
func KeyWithin(key *store.Token, spec TokenSpec, used int64) error {
	wider := func(msg string, args ...any) error {
		return forbidden("key_too_wide", fmt.Sprintf("the management key you sent "+msg+
			": sign in to the console to make or change a wider key", args...))
	}
	if spec.Management && !key.Management {
		return wider("is no management key, so it makes none")
	}
	if key.QuotaLimit > 0 {
		left := max(key.QuotaLimit-key.UsedQuota, 0)
		if spec.QuotaLimit <= 0 || spec.QuotaLimit-used > left {
			return wider("has %d units of quota left, so a key it makes or changes may have at most that much left (quota_limit at most %d)", left, left+used)
		}
	}
	if len(key.Models) > 0 {
		if len(spec.Models) == 0 {
			return wider("is limited to models %s, so the key must name some of them", strings.Join(key.Models, ", "))
		}
		for _, m := range spec.Models {
			if !slices.Contains(key.Models, m) {
				return wider("is limited to models %s, and %q is not one of them", strings.Join(key.Models, ", "), m)
			}
		}
	}
	if !key.ExpiresAt.IsZero() && (spec.ExpiresAt.IsZero() || spec.ExpiresAt.After(key.ExpiresAt)) {
		return wider("expires at %s, so the key must expire by then", key.ExpiresAt.UTC().Format(time.RFC3339))
	}
	for _, l := range []struct {
		name      string
		key, spec int64
	}{{"rpm", key.Limits.RPM, spec.Limits.RPM}, {"tpm", key.Limits.TPM, spec.Limits.TPM},
		{"max_parallel", key.Limits.MaxParallel, spec.Limits.MaxParallel}} {
		if l.key > 0 && (l.spec <= 0 || l.spec > l.key) {
			return wider("has the rate limit %s %d, so the key must have one no higher", l.name, l.key)
		}
	}
	return nil
}
