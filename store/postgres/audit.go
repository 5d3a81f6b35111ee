package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// AddAudit appends one entry to the audit log.
func (s *Store) AddAudit(ctx context.Context, e *store.AuditEntry) error {
	if err := store.PrepareAudit(e, now()); err != nil {
		return err
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO audit_log (`+strings.TrimPrefix(store.AuditColumns, "id, ")+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, e.CreatedAt.UnixMilli(), e.ActorID, e.Actor, e.Action,
		e.Target, string(e.Before), string(e.After)).Scan(&e.ID)
	if err != nil {
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
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := []string{"id < " + arg(before)}
	if f.Actor != "" {
		where = append(where, "actor = "+arg(f.Actor))
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok && prefix != "" {
		// by bytes: a range on the column would follow the collation
		where = append(where, "starts_with(action, "+arg(prefix+".")+")")
	} else if f.Action != "" {
		where = append(where, "action = "+arg(f.Action))
	}
	if f.Target != "" {
		where = append(where, "target = "+arg(f.Target))
	}
	if !f.Since.IsZero() {
		where = append(where, "created_at >= "+arg(f.Since.UnixMilli()))
	}
	if !f.Until.IsZero() {
		where = append(where, "created_at < "+arg(f.Until.UnixMilli()))
	}
	rows, err := s.pool.Query(ctx, `SELECT `+store.AuditColumns+` FROM audit_log WHERE `+
		strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT `+arg(limit), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	out, err := collect(rows, store.ScanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}
