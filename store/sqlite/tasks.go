package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// defaultTaskLimit is PendingTasks' and LeaseTasks' page size when the
// caller names none.
const defaultTaskLimit = 100

// CreateTask stores a new task and debits its reservation from its user's
// quota and its token's remaining limit (unless a plan pays it), and adds it
// to its windows' spend, in one transaction: a task's money lives in the
// store from its first moment, so a restart neither loses nor repeats it. Zero CreatedAt and UpdatedAt become now, an empty Status
// not_started. An ID already stored is store.ErrConflict.
func (s *Store) CreateTask(ctx context.Context, t *store.Task) error {
	if err := store.PrepareTask(t, now()); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tasks (id, user_id, token_id, channel, model,
			upstream_id, status, reserved, result, created_at, updated_at, progress, files, error,
			duration, price_task, price_second, cost, request_id, next_poll_at, polls,
			lease_owner, lease_until, windows, plan)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 0, ?, ?, ?, ?)`,
			t.ID, t.UserID, t.TokenID, t.Channel, t.Model, t.UpstreamID, t.Status, t.Reserved,
			t.Result, t.CreatedAt.UnixMilli(), t.UpdatedAt.UnixMilli(), t.Progress, t.Files, t.Error,
			t.Duration, t.PriceTask, t.PriceSecond, t.RequestID, store.ZeroMillis(t.NextPollAt),
			t.LeaseOwner, store.ZeroMillis(t.LeaseUntil), t.Windows, t.Plan)
		if err != nil {
			return sqlErr(err)
		}
		if t.Plan == "" {
			if err := moveReservation(ctx, tx, t.UserID, t.TokenID, t.Reserved); err != nil {
				return err
			}
		}
		return addWindowSpend(ctx, tx, store.TaskWindows(t.Windows, t.Reserved))
	})
	if err != nil {
		return fmt.Errorf("create task %q: %w", t.ID, err)
	}
	return nil
}

// moveReservation takes amount from the user's quota and adds it to the
// token's used quota; a negative amount gives it back. The arithmetic
// saturates as SettleBatch's does.
func moveReservation(ctx context.Context, tx *sql.Tx, userID, tokenID, amount int64) error {
	if amount == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET
		quota = CASE WHEN typeof(quota - ?1) = 'integer' THEN quota - ?1 ELSE -9223372036854775808 END
		WHERE id = ?2`, amount, userID); err != nil {
		return fmt.Errorf("reserve from user %d: %w", userID, err)
	}
	if tokenID != 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET
			used_quota = CASE WHEN typeof(used_quota + ?1) = 'integer' THEN used_quota + ?1 ELSE 9223372036854775807 END
			WHERE id = ?2`, amount, tokenID); err != nil {
			return fmt.Errorf("reserve from token %d: %w", tokenID, err)
		}
	}
	return nil
}

// TaskByID returns the task with id, or store.ErrNotFound.
func (s *Store) TaskByID(ctx context.Context, id string) (*store.Task, error) {
	t, err := store.ScanTask(s.r.QueryRowContext(ctx, `SELECT `+store.TaskColumns+` FROM tasks WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("task %q", id))
	}
	return t, nil
}

// UpdateTask writes what a poll or a submit learned and releases the
// lease, only while the task is unfinished and t.LeaseOwner holds it. The
// owner, reservation and prices are fixed at creation, so a caller holding
// a partly filled Task cannot wipe them.
func (s *Store) UpdateTask(ctx context.Context, t *store.Task) error {
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = now()
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tasks SET status = ?, progress = ?, files = ?,
		error = ?, result = ?, upstream_id = ?, channel = ?, next_poll_at = ?, polls = ?,
		updated_at = ?, lease_owner = '', lease_until = 0
		WHERE id = ? AND finished_at IS NULL AND lease_owner = ?`,
		t.Status, t.Progress, t.Files, t.Error, t.Result, t.UpstreamID, t.Channel,
		store.ZeroMillis(t.NextPollAt), t.Polls, t.UpdatedAt.UnixMilli(), t.ID, t.LeaseOwner)
	if err != nil {
		return fmt.Errorf("update task %q: %w", t.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update task %q: %w", t.ID, err)
	} else if n == 0 {
		return s.whyNotTask(ctx, t.ID, "update")
	}
	t.LeaseOwner, t.LeaseUntil = "", time.Time{}
	return nil
}

// whyNotTask tells a task that does not exist (ErrNotFound) from one that
// is finished or leased by another owner (ErrConflict).
func (s *Store) whyNotTask(ctx context.Context, id, op string) error {
	var one int
	err := s.w.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s task %q: %w", op, id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s task %q: %w", op, id, err)
	}
	return fmt.Errorf("%s task %q: finished, or leased by another owner: %w", op, id, store.ErrConflict)
}

// LeaseTasks leases up to limit due, unleased, unfinished tasks to owner
// in one statement, so two instances never lease the same task: SQLite
// runs one writer at a time, and the PostgreSQL store locks the rows it
// updates. The tasks due longest come first.
func (s *Store) LeaseTasks(ctx context.Context, owner string, until time.Time, limit int) ([]*store.Task, error) {
	if owner == "" {
		return nil, errors.New("lease tasks: empty owner")
	}
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	ts := now().UnixMilli()
	// most sweeps find nothing due: a read, not a write lock, says so
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE finished_at IS NULL
		AND next_poll_at <= ?1 AND lease_until < ?1 LIMIT 1`, ts).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return []*store.Task{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease tasks: %w", err)
	}
	rows, err := s.w.QueryContext(ctx, `UPDATE tasks SET lease_owner = ?1, lease_until = ?2
		WHERE id IN (SELECT id FROM tasks WHERE finished_at IS NULL AND next_poll_at <= ?3
			AND lease_until < ?3 ORDER BY next_poll_at, id LIMIT ?4)
		AND finished_at IS NULL AND lease_until < ?3
		RETURNING `+store.TaskColumns, owner, until.UnixMilli(), ts, limit)
	return collect(rows, err, store.ScanTask, "lease tasks")
}

// LeaseTask leases one task whose lease ran out to owner. A task owner
// holds already is not leased again: its poll is under way.
func (s *Store) LeaseTask(ctx context.Context, id, owner string, until time.Time) (*store.Task, error) {
	if owner == "" {
		return nil, errors.New("lease task: empty owner")
	}
	t, err := store.ScanTask(s.w.QueryRowContext(ctx, `UPDATE tasks SET lease_owner = ?1, lease_until = ?2
		WHERE id = ?3 AND finished_at IS NULL AND lease_until < ?4
		RETURNING `+store.TaskColumns, owner, until.UnixMilli(), id, now().UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.whyNotTask(ctx, id, "lease")
	}
	if err != nil {
		return nil, fmt.Errorf("lease task %q: %w", id, err)
	}
	return t, nil
}

// ReleaseTasks ends owner's leases, so another instance (or the next
// configuration) takes the tasks up at once rather than when they expire.
func (s *Store) ReleaseTasks(ctx context.Context, owner string) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE tasks SET lease_owner = '', lease_until = 0
		WHERE lease_owner = ?`, owner); err != nil {
		return fmt.Errorf("release tasks of %q: %w", owner, err)
	}
	return nil
}

// FinishTask settles a task exactly once: the UPDATE that sets finished_at
// matches only an unfinished task, and the money moves in its transaction
// only when it matched. The reservation debited at creation comes back
// whole, and row charges the real cost like any usage row.
func (s *Store) FinishTask(ctx context.Context, t *store.Task, row *store.UsageLog) (bool, error) {
	ts := now()
	if err := store.PrepareFinish(t, row, ts); err != nil {
		return false, err
	}
	return s.finishTask(ctx, t, []*store.UsageLog{row}, ts, false)
}

// FinishTaskRows implements store.FileStore: FinishTask with a row per
// line of a batch, each charging its own cost.
func (s *Store) FinishTaskRows(ctx context.Context, t *store.Task, rows []*store.UsageLog) (bool, error) {
	ts := now()
	if err := store.PrepareFinishRows(t, rows, ts); err != nil {
		return false, err
	}
	return s.finishTask(ctx, t, rows, ts, true)
}

// finishTask settles t with rows; each row keeps its own cost when
// perRow, else the one row charges t.Cost.
func (s *Store) finishTask(ctx context.Context, t *store.Task, rows []*store.UsageLog, ts time.Time, perRow bool) (bool, error) {
	settled := false
	ids := make([]int64, len(rows))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var userID, tokenID, reserved int64
		var windows, plan string
		err := tx.QueryRowContext(ctx, `UPDATE tasks SET status = ?, progress = ?, files = ?,
			error = ?, result = ?, upstream_id = ?, channel = ?, cost = ?, finished_at = ?,
			updated_at = ?, lease_owner = '', lease_until = 0
			WHERE id = ? AND finished_at IS NULL
			RETURNING user_id, token_id, reserved, windows, plan`,
			t.Status, t.Progress, t.Files, t.Error, t.Result, t.UpstreamID, t.Channel, t.Cost,
			t.FinishedAt.UnixMilli(), ts.UnixMilli(), t.ID).Scan(&userID, &tokenID, &reserved, &windows, &plan)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // finished before: nothing moves
		}
		if err != nil {
			return err
		}
		if plan == "" {
			if err := moveReservation(ctx, tx, userID, tokenID, -reserved); err != nil {
				return err
			}
		}
		// the row counts the cost in the windows, which give back the
		// reservation they counted since the submit
		if perRow {
			store.TaskRowsSettled(t, rows, userID, tokenID, windows, plan)
		} else {
			store.TaskSettled(t, rows[0], userID, tokenID, windows, plan)
		}
		if err := s.settleRows(ctx, tx, rows, ids, ts, store.TaskWindows(windows, -reserved), &bloomBatch{}); err != nil {
			return err
		}
		settled = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("finish task %q: %w", t.ID, err)
	}
	if settled {
		for i, row := range rows {
			store.FinishedTask(t, row, ids[i], ts)
		}
	}
	return settled, nil
}

// PendingTasks returns up to limit (100 when not positive) unfinished
// tasks, least recently updated first.
func (s *Store) PendingTasks(ctx context.Context, limit int) ([]*store.Task, error) {
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.TaskColumns+` FROM tasks
		WHERE finished_at IS NULL ORDER BY updated_at, id LIMIT ?`, limit)
	return collect(rows, err, store.ScanTask, "pending tasks")
}
