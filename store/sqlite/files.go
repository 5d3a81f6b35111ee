package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateFile implements store.FileStore.
func (s *Store) CreateFile(ctx context.Context, f *store.File) error {
	if err := store.PrepareFile(f, now()); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO files (`+store.FileColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ID, f.UserID, f.Purpose, f.Filename, f.Bytes, f.Lines, f.CreatedAt.UnixMilli(), store.ZeroMillis(f.ExpiresAt)); err != nil {
		return fmt.Errorf("create file %q: %w", f.ID, sqlErr(err))
	}
	return nil
}

// FileByID implements store.FileStore.
func (s *Store) FileByID(ctx context.Context, id string) (*store.File, error) {
	f, err := store.ScanFile(s.r.QueryRowContext(ctx, `SELECT `+store.FileColumns+` FROM files WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("file %q", id))
	}
	return f, nil
}

// ListFiles implements store.FileStore.
func (s *Store) ListFiles(ctx context.Context, userID int64, purpose, after string, limit int) ([]*store.File, error) {
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.FileColumns+` FROM files
		WHERE user_id = ?1 AND (?2 = '' OR purpose = ?2)
		AND (?3 = '' OR (created_at, id) < (SELECT created_at, id FROM files WHERE id = ?3))
		ORDER BY created_at DESC, id DESC LIMIT ?4`, userID, purpose, after, limit)
	return collect(rows, err, store.ScanFile, "list files")
}

// DeleteFile implements store.FileStore.
func (s *Store) DeleteFile(ctx context.Context, userID int64, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM files WHERE id = ? AND user_id = ?`, id, userID)
	if err != nil {
		return fmt.Errorf("delete file %q: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete file %q: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("delete file %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// ExpiredFiles implements store.FileStore.
func (s *Store) ExpiredFiles(ctx context.Context, before time.Time, limit int) ([]*store.File, error) {
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.FileColumns+` FROM files
		WHERE expires_at > 0 AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`, before.UnixMilli(), limit)
	return collect(rows, err, store.ScanFile, "expired files")
}

// UserTasks implements store.FileStore.
func (s *Store) UserTasks(ctx context.Context, userID int64, prefix, after string, limit int) ([]*store.Task, error) {
	if limit <= 0 {
		limit = defaultTaskLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.TaskColumns+` FROM tasks
		WHERE user_id = ?1 AND substr(id, 1, length(?2)) = ?2
		AND (?3 = '' OR (created_at, id) < (SELECT created_at, id FROM tasks WHERE id = ?3))
		ORDER BY created_at DESC, id DESC LIMIT ?4`, userID, prefix, after, limit)
	return collect(rows, err, store.ScanTask, "user tasks")
}

// UserFileBytes implements store.FileStore.
func (s *Store) UserFileBytes(ctx context.Context, userID int64) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes), 0) FROM files WHERE user_id = ?`, userID).Scan(&n); err != nil {
		return 0, fmt.Errorf("user file bytes: %w", err)
	}
	return n, nil
}
