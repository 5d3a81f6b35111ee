package account

import "github.com/caddy-model-gateway/gateway/store"

// Operator is whoever runs the CLI on the server. Holding the database
// already, they may do to anyone, root included, what root may, and may
// also make a root account (the web API never can).
var Operator = &store.User{Username: "operator", Role: store.RoleRoot}

// IsAdmin reports whether u administers the gateway.
func IsAdmin(u *store.User) bool { return u.Role == store.RoleAdmin || u.Role == store.RoleRoot }

// MayGrant says whether actor may give role: only root makes admins, and
// root is the one account made at bootstrap (or by the Operator).
func MayGrant(actor *store.User, role string) error {
	if actor == Operator {
		return CheckRole(role)
	}
	switch {
	case role == store.RoleRoot:
		return forbidden("role_not_allowed", "there is one root account; it cannot be granted")
	case role == store.RoleAdmin && actor.Role != store.RoleRoot:
		return forbidden("role_not_allowed", "only root can make administrators")
	}
	return CheckRole(role)
}

// CheckRole accepts the store's roles only.
func CheckRole(role string) error {
	switch role {
	case store.RoleUser, store.RoleAdmin, store.RoleRoot:
		return nil
	}
	return inputErrorf("role must be user, admin or root, not %q", role)
}

// mayChange says whether actor may make c to target. Administrators
// manage users; only root manages administrators; root's own role and
// status are fixed, and nobody changes their own role or status.
func mayChange(actor, target *store.User, c UserChange) error {
	if actor == Operator {
		return nil
	}
	if target.Role == store.RoleRoot || target.Role == store.RoleAdmin && actor.Role != store.RoleRoot {
		if target.ID != actor.ID || c.Status != nil || c.Role != nil || c.Limits != nil {
			return forbidden("not_allowed", "only root can change an administrator, and root's own role and status are fixed")
		}
	}
	if target.ID == actor.ID && (c.Status != nil || c.Role != nil) {
		return forbidden("not_allowed", "you cannot change your own role or status: ask another administrator")
	}
	// an administrator crediting themself would print money
	if target.ID == actor.ID && c.QuotaDelta != nil && *c.QuotaDelta != 0 && actor.Role != store.RoleRoot {
		return forbidden("not_allowed", "only root changes their own quota: ask root to change yours")
	}
	return nil
}

// maySetKeyLimits says whether actor may set the limits of a key owner
// holds: only root sets an administrator's.
func maySetKeyLimits(actor, owner *store.User) error {
	if actor != Operator && IsAdmin(owner) && actor.Role != store.RoleRoot {
		return forbidden("not_allowed", "only root can change the limits of an administrator's key")
	}
	return nil
}
