package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/caddy-model-gateway/gateway/store"
)

// Task statuses this store treats as final (package store names none yet):
// PendingTasks skips them; every other status is still in flight.
const (
	taskSucceeded = "succeeded"
	taskFailed    = "failed"
)

// taskPending is the status CreateTask gives a task that has none.
const taskPending = "pending"

// defaultTaskLimit is PendingTasks' page size when the caller names none.
const defaultTaskLimit = 100

const taskColumns = `id, user_id, token_id, channel, model, upstream_id, status, reserved,
	result, created_at, updated_at`

func scanTask(sc scanner) (*store.Task, error) {
	var (
		t                    store.Task
		createdAt, updatedAt sql.NullInt64
	)
	err := sc.Scan(&t.ID, &t.UserID, &t.TokenID, &t.Channel, &t.Model, &t.UpstreamID,
		&t.Status, &t.Reserved, &t.Result, &createdAt, &updatedAt)
	if err != nil {
		return nil, err
	}
	t.CreatedAt = fromMillis(createdAt)
	t.UpdatedAt = fromMillis(updatedAt)
	return &t, nil
}

// CreateTask stores a new task. Zero CreatedAt and UpdatedAt become now and
// an empty Status "pending". An ID already stored is store.ErrConflict.
func (s *Store) CreateTask(ctx context.Context, t *store.Task) error {
	if t.ID == "" {
		return errors.New("create task: empty id")
	}
	ts := now()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = ts
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	if t.Status == "" {
		t.Status = taskPending
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO tasks (id, user_id, token_id, channel, model,
		upstream_id, status, reserved, result, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.UserID, t.TokenID, t.Channel, t.Model, t.UpstreamID, t.Status, t.Reserved,
		t.Result, t.CreatedAt.UnixMilli(), t.UpdatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("create task %q: %w", t.ID, sqlErr(err))
	}
	return nil
}

// TaskByID returns the task with id, or store.ErrNotFound.
func (s *Store) TaskByID(ctx context.Context, id string) (*store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("task %q", id))
	}
	return t, nil
}

// UpdateTask writes t's Status, Result, UpstreamID and UpdatedAt (now, when
// zero); the other fields are fixed at creation, so a caller holding a
// partly filled Task cannot wipe its owner or reservation.
func (s *Store) UpdateTask(ctx context.Context, t *store.Task) error {
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = now()
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tasks SET status = ?, result = ?, upstream_id = ?,
		updated_at = ? WHERE id = ?`, t.Status, t.Result, t.UpstreamID, t.UpdatedAt.UnixMilli(), t.ID)
	if err != nil {
		return fmt.Errorf("update task %q: %w", t.ID, err)
	}
	return mustAffect(res, fmt.Sprintf("task %q", t.ID))
}

// PendingTasks returns up to limit (100 when not positive) tasks that are
// neither succeeded nor failed, least recently updated first, so a poller
// that works from the front treats every task fairly.
func (s *Store) PendingTasks(ctx context.Context, limit int) ([]*store.Task, error) {
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE status NOT IN (?, ?) ORDER BY updated_at, id LIMIT ?`,
		taskSucceeded, taskFailed, limit)
	if err != nil {
		return nil, fmt.Errorf("pending tasks: %w", err)
	}
	defer rows.Close()
	tasks := []*store.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("pending tasks: %w", err)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending tasks: %w", err)
	}
	return tasks, nil
}
