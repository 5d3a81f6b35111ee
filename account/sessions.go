package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// DefaultSessionLifetime is how long a web login lasts unused when the
// configuration names no lifetime.
const DefaultSessionLifetime = 7 * 24 * time.Hour

// DefaultSessionMaxLifetime is how long a web login lasts from the
// moment it was made, however often it is used, when the configuration
// names no maximum (nor a sliding lifetime longer than this).
const DefaultSessionMaxLifetime = 30 * 24 * time.Hour

// sessionIDLength is 43 base-62 characters: about 256 bits.
const sessionIDLength = 43

// ErrSessionExpired means a session id names no live session of an
// enabled user.
var ErrSessionExpired = errors.New("the session has expired or was ended: log in again")

// Sessions are web logins. The caller carries a session's id (in a
// cookie); the store keeps only its hash, so a copy of the database lets
// nobody in.
type Sessions struct {
	Store    store.Store
	Lifetime time.Duration // 0: DefaultSessionLifetime
	// MaxLifetime ends a session this long after its login, however often
	// it slid: a stolen cookie used now and then does not last forever.
	// 0: DefaultSessionMaxLifetime, or Lifetime when that is longer.
	MaxLifetime time.Duration
}

// MaxAge is how long a new or slid session lasts.
func (s Sessions) MaxAge() time.Duration {
	if s.Lifetime > 0 {
		return s.Lifetime
	}
	return DefaultSessionLifetime
}

// Absolute is how long a session lasts from its login at most.
func (s Sessions) Absolute() time.Duration {
	if s.MaxLifetime > 0 {
		return s.MaxLifetime
	}
	return max(DefaultSessionMaxLifetime, s.MaxAge())
}

// Start stores a new session for userID and returns its id.
func (s Sessions) Start(ctx context.Context, userID int64) (string, error) {
	id, err := keys.Random("", sessionIDLength)
	if err != nil {
		return "", err
	}
	now := time.Now()
	sess := &store.Session{IDHash: keys.Hash(id), UserID: userID, CreatedAt: now,
		ExpiresAt: now.Add(min(s.MaxAge(), s.Absolute()))}
	if err := s.Store.CreateSession(ctx, sess); err != nil {
		return "", fmt.Errorf("starting a session: %w", err)
	}
	return id, nil
}

// User returns the enabled user session id belongs to, or
// ErrSessionExpired. It slides the session's expiry forward once a
// quarter of its lifetime has passed, so an active user stays logged in
// without a write on every request, but never past Absolute from its
// login; slidTo is the new expiry when it slid (zero when not), for the
// caller to send the id again with its new lifetime.
func (s Sessions) User(ctx context.Context, id string) (u *store.User, slidTo time.Time, err error) {
	h := keys.Hash(id)
	sess, err := s.Store.SessionByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return nil, time.Time{}, ErrSessionExpired
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	end := sess.CreatedAt.Add(s.Absolute())
	if !sess.CreatedAt.IsZero() && !time.Now().Before(end) {
		_ = s.Store.DeleteSession(ctx, h)
		return nil, time.Time{}, ErrSessionExpired
	}
	u, err = s.Store.UserByID(ctx, sess.UserID)
	if errors.Is(err, store.ErrNotFound) || err == nil && u.Status != store.UserEnabled {
		return nil, time.Time{}, ErrSessionExpired
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	life := s.MaxAge()
	if time.Until(sess.ExpiresAt) < life*3/4 {
		next := time.Now().Add(life)
		if !sess.CreatedAt.IsZero() && next.After(end) {
			next = end
		}
		if next.After(sess.ExpiresAt) && s.Store.TouchSession(ctx, h, next) == nil {
			slidTo = next
		}
	}
	return u, slidTo, nil
}

// End ends the session id; ending one already gone is no error.
func (s Sessions) End(ctx context.Context, id string) error {
	return s.Store.DeleteSession(ctx, keys.Hash(id))
}

// EndAll ends every session of userID: for a lost or shared device.
func (s Sessions) EndAll(ctx context.Context, userID int64) error {
	return s.Store.DeleteUserSessions(ctx, userID)
}
