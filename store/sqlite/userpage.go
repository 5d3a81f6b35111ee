package sqlite

import (
	"context"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// ListUserSessions returns userID's live sessions, newest first.
func (s *Store) ListUserSessions(ctx context.Context, userID int64) ([]*store.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.SessionColumns+` FROM sessions
		WHERE user_id = ? AND expires_at > ? ORDER BY created_at DESC, id_hash LIMIT ?`, userID, now().UnixMilli(), defaultListLimit)
	return collect(rows, err, store.ScanSession, "list sessions of user %d", userID)
}

// ListInvitees returns up to limit users inviterID invited, newest first.
func (s *Store) ListInvitees(ctx context.Context, inviterID int64, limit int) ([]*store.Invitee, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.InviteeColumns+` FROM users
		WHERE invited_by = ? ORDER BY id DESC LIMIT ?`, inviterID, limit)
	return collect(rows, err, store.ScanInvitee, "list invitees of user %d", inviterID)
}

// UserBudgetsOf reads the group and plan of each user of ids that has one.
func (s *Store) UserBudgetsOf(ctx context.Context, ids []int64) (map[int64]store.UserBudget, error) {
	out := map[int64]store.UserBudget{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.r.QueryContext(ctx, `SELECT user_id, `+store.UserBudgetColumns+` FROM user_budgets
		WHERE user_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	list, err := collect(rows, err, store.ScanUserBudgetOf, "user budgets of %d users", len(ids))
	if err != nil {
		return nil, err
	}
	for _, b := range list {
		out[b.UserID] = b.UserBudget
	}
	return out, nil
}
