package postgres

import (
	"context"
	"fmt"
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
	w := store.NewWhere("$")
	store.AuditWhere(f, w, func(w *store.Where, family string) string {
		// by bytes: a range on the column would follow the collation
		return "starts_with(action, " + w.Arg(family+".") + ")"
	})
	rows, err := s.pool.Query(ctx, `SELECT `+store.AuditColumns+` FROM audit_log`+w.String()+
		` ORDER BY id DESC LIMIT `+w.Arg(limit), w.Args()...)
	return collect(rows, err, store.ScanAudit, "list audit log")
}
