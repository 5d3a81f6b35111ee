package postgres

import (
	"context"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// SetTaskTrace keeps the trace of a task's submit.
func (s *Store) SetTaskTrace(ctx context.Context, id string, tr store.TaskTrace) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET trace_id = $1, span_id = $2 WHERE id = $3`, tr.TraceID, tr.SpanID, id)
	if err != nil {
		return fmt.Errorf("set task %q trace: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("task %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// TaskTrace reads the trace of a task's submit.
func (s *Store) TaskTrace(ctx context.Context, id string) (store.TaskTrace, error) {
	var tr store.TaskTrace
	err := s.pool.QueryRow(ctx, `SELECT trace_id, span_id FROM tasks WHERE id = $1`, id).Scan(&tr.TraceID, &tr.SpanID)
	if err != nil {
		return store.TaskTrace{}, notFound(err, fmt.Sprintf("task %q", id))
	}
	return tr, nil
}
