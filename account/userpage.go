package account

import (
	"context"
	"fmt"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// The console's page about one user: an administrator changes another
// user's keys and ends their sessions. The rule is the one for limits:
// administrators manage users, only root manages administrators.

// AuditUserSessions is an administrator ending a user's sessions.
const AuditUserSessions = "user.sessions_end"

// MayManage says whether actor may change user u's keys and sessions.
func MayManage(actor, u *store.User) error {
	if err := maySetKeyLimits(actor, u); err != nil {
		return forbidden("not_allowed", "only root can change an administrator's keys and sessions")
	}
	return nil
}

// AdminUpdateToken applies spec and status to any user's key id, as
// actor, and returns the key before and after. The caller drops the key
// from its cache and audits the change.
func AdminUpdateToken(ctx context.Context, st store.Store, actor *store.User, id int64, spec TokenSpec, status string) (before, after *store.Token, err error) {
	before, err = st.TokenByID(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	owner, err := st.UserByID(ctx, before.UserID)
	if err != nil {
		return nil, nil, err
	}
	if err := MayManage(actor, owner); err != nil {
		return nil, nil, err
	}
	after, err = UpdateToken(ctx, st, owner.ID, id, spec, status)
	if err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// SessionID is how a session is named outside the store: a prefix of the
// hash the store keeps (itself a hash of the cookie), enough to tell a
// user's sessions apart and nothing to sign in with.
func SessionID(s *store.Session) string {
	if len(s.IDHash) > 16 {
		return s.IDHash[:16]
	}
	return s.IDHash
}

// EndUserSessions ends user id's session named sid (SessionID), or all of
// them when sid is "", as actor, and says how many ended.
func EndUserSessions(ctx context.Context, st store.Store, actor *store.User, id int64, sid string) (int, error) {
	u, err := st.UserByID(ctx, id)
	if err != nil {
		return 0, err
	}
	if err := MayManage(actor, u); err != nil {
		return 0, err
	}
	live, err := st.ListUserSessions(ctx, id)
	if err != nil {
		return 0, err
	}
	if sid == "" {
		if err := st.DeleteUserSessions(ctx, id); err != nil {
			return 0, err
		}
		return len(live), nil
	}
	for _, s := range live {
		if SessionID(s) == sid {
			if err := st.DeleteSession(ctx, s.IDHash); err != nil {
				return 0, err
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("session %q of user %d: %w", sid, id, store.ErrNotFound)
}

// InvitationRule is the reward an invitation earns, as configured.
func (g *Gate) InvitationRule() store.InvitationReward { return g.invitationReward }

// ValidSessionID says whether s can name a session (lower-case hex).
func ValidSessionID(s string) bool {
	return s != "" && len(s) <= 64 && strings.Trim(s, "0123456789abcdef") == ""
}
