package account

import (
	"context"
	"errors"
	"time"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Password recovery without email: an administrator issues a link that
// sets a new password once. The link's secret is random (256 bits), the
// store keeps its hash only, it dies after its lifetime or its first use,
// a new link ends the user's earlier one, and using it ends every session
// of the user, so whoever held the old password is out.

// DefaultResetLinkLifetime is how long a reset link lasts when the
// configuration names no lifetime.
const DefaultResetLinkLifetime = time.Hour

// maxResetLinkLifetime bounds what an administrator may ask for: a link is
// a password in transit.
const maxResetLinkLifetime = 7 * 24 * time.Hour

// resetTokenLength is 43 base-62 characters: about 256 bits.
const resetTokenLength = 43

// Audit actions of sign-in.
const (
	AuditResetLink     = "user.reset_link"      // an administrator issued a link
	AuditResetLinkUsed = "user.reset_link_used" // its user set a password with it
	AuditSSOLink       = "user.sso_link"
	AuditSSOUnlink     = "user.sso_unlink"
	AuditTOTPEnable    = "user.totp_enable"
	AuditTOTPDisable   = "user.totp_disable"
	AuditPasskeyAdd    = "user.passkey_add"
	AuditPasskeyDelete = "user.passkey_delete"
	AuditFactorsReset  = "user.second_factor_reset" // an administrator cleared them
)

// ResetLink is an issued link's secret and end; the secret is shown once.
type ResetLink struct {
	Token     string
	ExpiresAt time.Time
}

// IssueResetLink makes a one-time password reset link for user id, as
// actor, lasting ttl (0: DefaultResetLinkLifetime), ending the user's
// earlier link, and audits it.
func IssueResetLink(ctx context.Context, st store.Store, actor *store.User, id int64, ttl time.Duration) (*ResetLink, error) {
	if ttl == 0 {
		ttl = DefaultResetLinkLifetime
	}
	if ttl < time.Second || ttl > maxResetLinkLifetime {
		return nil, invalidf("invalid_ttl", "a reset link lasts from 1s to %s, not %s", maxResetLinkLifetime, ttl)
	}
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := mayResetSignIn(actor, target); err != nil {
		return nil, err
	}
	if target.Status != store.UserEnabled {
		return nil, invalidf("user_disabled", "%s is disabled: enable the account before sending a reset link", target.Username)
	}
	token, err := keys.Random("", resetTokenLength)
	if err != nil {
		return nil, err
	}
	link := &ResetLink{Token: token, ExpiresAt: time.Now().Add(ttl).Truncate(time.Millisecond)}
	if err := st.CreateChallenge(ctx, &store.Challenge{IDHash: keys.Hash(token), Kind: store.ChallengeReset,
		UserID: id, ExpiresAt: link.ExpiresAt}, true); err != nil {
		return nil, err
	}
	if err := Audit(ctx, st, actor, AuditResetLink, UserTarget(id), nil,
		Fields{"username": target.Username, "expires_at": link.ExpiresAt.UTC().Format(time.RFC3339)}); err != nil {
		return nil, err
	}
	return link, nil
}

// ErrResetLinkInvalid is one answer for an unknown, used and expired link.
var ErrResetLinkInvalid = &InputError{Code: "reset_link_invalid",
	Msg: "this password reset link is not valid: it was used, has expired, or was replaced by a newer one; ask an administrator for a new link"}

// ResetLinkUser is the user a live link would reset, for the page to
// greet them by name; ErrResetLinkInvalid when the link is not live.
func (g *Gate) ResetLinkUser(ctx context.Context, network, token string) (*store.User, time.Time, error) {
	if err := g.Limit(network, "reset", 0); err != nil {
		return nil, time.Time{}, err
	}
	c, err := g.store.Challenge(ctx, store.ChallengeReset, keys.Hash(token))
	if errors.Is(err, store.ErrNotFound) || token == "" {
		return nil, time.Time{}, ErrResetLinkInvalid
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	u, err := g.store.UserByID(ctx, c.UserID)
	if errors.Is(err, store.ErrNotFound) || err == nil && u.Status != store.UserEnabled {
		return nil, time.Time{}, ErrResetLinkInvalid
	}
	return u, c.ExpiresAt, err
}

// UseResetLink sets a new password with a link from network: the link is
// taken, the password set and every session of the user ended in one
// transaction, and the change audited as the user's own.
func (g *Gate) UseResetLink(ctx context.Context, network, token, password string) (*store.User, error) {
	if err := g.Limit(network, "reset", 0); err != nil {
		return nil, err
	}
	// the password is checked first, so a typo does not spend the link
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	if token == "" {
		return nil, ErrResetLinkInvalid
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	id, err := g.store.ResetPassword(ctx, keys.Hash(token), hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrResetLinkInvalid
	}
	if err != nil {
		return nil, err
	}
	u, err := g.store.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := Audit(ctx, g.store, u, AuditResetLinkUsed, UserTarget(id), nil, Fields{"password": "(changed)", "sessions": "ended"}); err != nil {
		return nil, err
	}
	return u, nil
}
