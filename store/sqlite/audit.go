package sqlite

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
	w := store.NewWhere("?")
	store.AuditWhere(f, w, func(w *store.Where, family string) string {
		// "user." is every action from "user." up to "user/" ('/' follows '.')
		return "action >= " + w.Arg(family+".") + " AND action < " + w.Arg(family+"/")
	})
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.AuditColumns+` FROM audit_log`+w.String()+
		` ORDER BY id DESC LIMIT `+w.Arg(limit), w.Args()...)
	return collect(rows, err, store.ScanAudit, "list audit log")
}
