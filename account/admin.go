package account

import (
	"context"
	"errors"

	"github.com/caddy-model-gateway/gateway/store"
)

// LimitsChange is a change of rate limits: absent fields keep their
// value, 0 clears one (the gateway's default applies). Only
// administrators and the Operator set limits, so a user cannot lift their
// own.
type LimitsChange struct {
	RPM         *int64 `json:"rpm"`
	TPM         *int64 `json:"tpm"`
	MaxParallel *int64 `json:"max_parallel"`
}

// Apply returns l with the change made.
func (c LimitsChange) Apply(l store.Limits) (store.Limits, error) {
	for _, f := range []struct {
		name string
		v    *int64
		into *int64
	}{{"rpm", c.RPM, &l.RPM}, {"tpm", c.TPM, &l.TPM}, {"max_parallel", c.MaxParallel, &l.MaxParallel}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return l, invalidf("invalid_limits", "limits.%s must be 0 (the gateway's default) or a positive number, not %d", f.name, *f.v)
		}
		*f.into = *f.v
	}
	return l, nil
}

// UserChange is what an administrator asks to change about a user; nil
// fields are kept.
type UserChange struct {
	Status     *string
	Role       *string
	QuotaDelta *int64 // a credit (> 0) is a payment, which may owe an inviter their reward
	Limits     *LimitsChange
}

// UpdateUser checks that actor may make c to user id and makes it whole,
// in one store transaction. Disabling a user or changing their role ends
// their sessions: every request reads the role afresh, but a login made
// for one role does not carry over to another, and whoever holds a copy
// of a demoted user's cookie loses it. The caller tells its caches: the
// quota delta to the ledger, new limits to the key cache.
func UpdateUser(ctx context.Context, st store.Store, actor *store.User, id int64, c UserChange) (*store.User, error) {
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := mayChange(actor, target, c); err != nil {
		return nil, err
	}
	if c.Status != nil && *c.Status != store.UserEnabled && *c.Status != store.UserDisabled {
		return nil, invalidf("invalid_status", "status must be enabled or disabled, not %q", *c.Status)
	}
	if c.Role != nil {
		if err := MayGrant(actor, *c.Role); err != nil {
			return nil, err
		}
	}
	var change store.UserChange
	if c.QuotaDelta != nil {
		if target.Quota+*c.QuotaDelta < 0 {
			return nil, belowZero(*c.QuotaDelta, target.Quota)
		}
		change.QuotaDelta = *c.QuotaDelta
	}
	if c.Limits != nil {
		limits, err := c.Limits.Apply(target.Limits)
		if err != nil {
			return nil, err
		}
		change.Limits = &limits
	}
	if c.Status != nil {
		change.Status = c.Status
		change.EndSessions = *c.Status == store.UserDisabled
	}
	if c.Role != nil && *c.Role != target.Role {
		change.Role = c.Role
		change.EndSessions = true
	}
	u, err := st.UpdateUser(ctx, id, change)
	if errors.Is(err, store.ErrInsufficientQuota) {
		// spent between the read above and the transaction
		return nil, belowZero(change.QuotaDelta, target.Quota)
	}
	return u, err
}

func belowZero(delta, balance int64) error {
	return invalidf("invalid_quota", "quota_delta %d would take the balance of %d below zero", delta, balance)
}

// SetKeyLimits changes the rate limits of any user's key id, as actor:
// administrators manage users' keys, only root administrators'. The
// caller drops the key from its cache.
func SetKeyLimits(ctx context.Context, st store.Store, actor *store.User, id int64, c LimitsChange) (*store.Token, error) {
	t, err := st.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	owner, err := st.UserByID(ctx, t.UserID)
	if err != nil {
		return nil, err
	}
	if err := maySetKeyLimits(actor, owner); err != nil {
		return nil, err
	}
	limits, err := c.Apply(t.Limits)
	if err != nil {
		return nil, err
	}
	if err := st.SetTokenLimits(ctx, id, limits); err != nil {
		return nil, err
	}
	t.Limits = limits
	return t, nil
}

// ResetPassword sets the password of user id, as actor, and ends every
// session of theirs: administrators reset users' passwords, only root an
// administrator's. Root's password and one's own are changed with the
// current one (ChangePassword) or by the Operator, so a borrowed
// session cannot lock its owner out.
func ResetPassword(ctx context.Context, st store.Store, actor *store.User, id int64, password string) error {
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return err
	}
	if err := mayResetSignIn(actor, target); err != nil {
		return err
	}
	return SetPassword(ctx, st, id, password, "")
}

// mayResetSignIn says whether actor may change how target signs in (a
// password reset or its link, a single sign-on link, second factors
// cleared): administrators a user's, only root an administrator's, and
// nobody their own or root's but the Operator.
func mayResetSignIn(actor, target *store.User) error {
	if actor == Operator {
		return nil
	}
	switch {
	case target.ID == actor.ID:
		return forbidden("not_allowed", "change your own password with your current one, not by a reset")
	case target.Role == store.RoleRoot:
		return forbidden("not_allowed", "root's password is changed by root, or on the server with 'caddy gateway user passwd'")
	case target.Role == store.RoleAdmin && actor.Role != store.RoleRoot:
		return forbidden("not_allowed", "only root can reset an administrator's password")
	}
	return nil
}
