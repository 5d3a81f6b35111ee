package store

import (
	"context"
	"errors"
	"time"
)

// File is a file a user uploaded (/v1/files) or a batch wrote (its output
// and error files): its metadata; the bytes are kept by the batch engine
// on disk. It belongs to UserID alone.
type File struct {
	ID       string
	UserID   int64
	Purpose  string
	Filename string
	Bytes    int64
	// Lines counts the file's JSON lines (a batch's input).
	Lines     int64
	CreatedAt time.Time
	// ExpiresAt is when retention deletes it; zero for never.
	ExpiresAt time.Time
}

// FileStore keeps files' metadata and lists a user's batches.
type FileStore interface {
	// CreateFile stores f, setting CreatedAt if zero; an ID already
	// stored is ErrConflict.
	CreateFile(ctx context.Context, f *File) error
	// FileByID returns the file with id; ErrNotFound when there is none.
	FileByID(ctx context.Context, id string) (*File, error)
	// ListFiles returns up to limit of userID's files (of purpose, when
	// not ""), newest first, after the file with id after when not "".
	ListFiles(ctx context.Context, userID int64, purpose, after string, limit int) ([]*File, error)
	// DeleteFile deletes userID's file id; ErrNotFound when userID has
	// none of that id.
	DeleteFile(ctx context.Context, userID int64, id string) error
	// UserFileBytes is the size of all of userID's files together.
	UserFileBytes(ctx context.Context, userID int64) (int64, error)
	// ExpiredFiles returns up to limit files whose ExpiresAt is set and
	// not after before, oldest first.
	ExpiredFiles(ctx context.Context, before time.Time, limit int) ([]*File, error)
	// UserTasks returns up to limit of userID's tasks whose id starts with
	// prefix, newest first, after the task with id after when not "".
	UserTasks(ctx context.Context, userID int64, prefix, after string, limit int) ([]*Task, error)
	// FinishTaskRows is FinishTask with a usage row per part of the task
	// (a batch's lines): each row charges its own Cost, t.Cost is their
	// sum, and all are written, with the reservation given back, in the
	// one transaction that settles the task exactly once.
	FinishTaskRows(ctx context.Context, t *Task, rows []*UsageLog) (bool, error)
}

// PrepareFile checks a file before it is stored and sets its CreatedAt.
func PrepareFile(f *File, now time.Time) error {
	switch {
	case f.ID == "":
		return errors.New("create file: empty id")
	case f.UserID == 0:
		return errors.New("create file: no user")
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	return nil
}

// FileColumns are the files columns ScanFile reads, in its order.
const FileColumns = `id, user_id, purpose, filename, bytes, lines, created_at, expires_at`

// ScanFile reads a row of FileColumns.
func ScanFile(sc RowScanner) (*File, error) {
	var (
		f                    File
		createdAt, expiresAt *int64
	)
	if err := sc.Scan(&f.ID, &f.UserID, &f.Purpose, &f.Filename, &f.Bytes, &f.Lines, &createdAt, &expiresAt); err != nil {
		return nil, err
	}
	f.CreatedAt = FromMillis(createdAt)
	if expiresAt != nil && *expiresAt > 0 {
		f.ExpiresAt = FromMillis(expiresAt)
	}
	return &f, nil
}

// PrepareFinishRows checks the rows of FinishTaskRows, keys them by the
// task (one row per part, however often the task is settled) and sums
// their costs into t.Cost.
func PrepareFinishRows(t *Task, rows []*UsageLog, ts time.Time) error {
	if len(rows) == 0 {
		return errors.New("finish task: no usage rows")
	}
	t.Cost = 0
	for _, r := range rows {
		if r == nil {
			return errors.New("finish task: nil usage row")
		}
		if r.Key == "" {
			return errors.New("finish task: a usage row of a task with several has no key")
		}
		t.Cost = satAdd(t.Cost, r.Cost)
	}
	if t.FinishedAt.IsZero() {
		t.FinishedAt = ts
	}
	return nil
}

// TaskRowsSettled is TaskSettled for rows that each keep their own cost.
func TaskRowsSettled(t *Task, rows []*UsageLog, userID, tokenID int64, windows, plan string) {
	for _, r := range rows {
		r.UserID, r.TokenID, r.Windows, r.Plan = userID, tokenID, windows, plan
	}
	t.Windows, t.Plan = windows, plan
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}
