package sqlite

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// AddAudit appends one entry to the audit log.
func (s *Store) AddAudit(ctx context.Context, e *store.AuditEntry) error {
	if err := store.PrepareAudit(e, now()); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO audit_log (`+strings.TrimPrefix(store.AuditColumns, "id, ")+`)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, e.CreatedAt.UnixMilli(), e.ActorID, e.Actor, e.Action, e.Target,
		string(e.Before), string(e.After))
	if err != nil {
		return fmt.Errorf("add audit entry %s: %w", e.Action, err)
	}
	if e.ID, err = res.LastInsertId(); err != nil {
		return fmt.Errorf("add audit entry %s: %w", e.Action, err)
	}
	return nil
}

// ListAudit returns entries newest first (by id), narrowed by f, at most
// f.Limit (100 when not positive).
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*store.AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	before := f.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	where, args := []string{"id < ?"}, []any{before}
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok && prefix != "" {
		// "user." is every action from "user." up to "user/" ('/' follows '.')
		where, args = append(where, "action >= ?", "action < ?"), append(args, prefix+".", prefix+"/")
	} else if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.Target != "" {
		where, args = append(where, "target = ?"), append(args, f.Target)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, f.Until.UnixMilli())
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.AuditColumns+` FROM audit_log WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	out, err := collect(rows, store.ScanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}
