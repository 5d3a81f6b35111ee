package sqlite

import (
	"context"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// SetTaskTrace keeps the trace of a task's submit.
func (s *Store) SetTaskTrace(ctx context.Context, id string, tr store.TaskTrace) error {
	res, err := s.w.ExecContext(ctx, `UPDATE tasks SET trace_id = ?, span_id = ? WHERE id = ?`, tr.TraceID, tr.SpanID, id)
	if err != nil {
		return fmt.Errorf("set task %q trace: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set task %q trace: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("task %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// TaskTrace reads the trace of a task's submit.
func (s *Store) TaskTrace(ctx context.Context, id string) (store.TaskTrace, error) {
	var tr store.TaskTrace
	err := s.r.QueryRowContext(ctx, `SELECT trace_id, span_id FROM tasks WHERE id = ?`, id).Scan(&tr.TraceID, &tr.SpanID)
	if err != nil {
		return store.TaskTrace{}, notFound(err, fmt.Sprintf("task %q", id))
	}
	return tr, nil
}
