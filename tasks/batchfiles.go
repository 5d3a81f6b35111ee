package tasks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

// Files: what /v1/files keeps. Each file's metadata is a row of the
// store's files table, owned by one user; its bytes are one file in the
// batch directory (Config.BatchDir, beside the database), named by its
// id, written to a temporary name first and renamed into place, so a
// crash never leaves half a file under an id.

// FileIDPrefix starts every file id.
const FileIDPrefix = "file-"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// newFileID is file- and 120 random bits.
func newFileID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return FileIDPrefix + strings.ToLower(b32.EncodeToString(b[:]))
}

// derivedFileID is the id of a file a batch writes (its output, its
// errors): the same however often the batch is settled, so a settling
// cut short and done again writes the same file rather than a second.
func derivedFileID(batchID, what string) string {
	sum := sha256.Sum256([]byte(batchID + "/" + what))
	return FileIDPrefix + strings.ToLower(b32.EncodeToString(sum[:15]))
}

// FileNotFound is the answer for a file that does not exist and for
// someone else's alike.
func FileNotFound(id string) *adapters.Error {
	e := adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "No such File object: %s", id)
	e.Code = "file_not_found"
	return e
}

func (e *Engine) filePath(id string) string { return filepath.Join(e.cfg.BatchDir, id) }

// Upload is a file to store for a user.
type Upload struct {
	UserID   int64
	Purpose  string
	Filename string
	// Body is read to its end, at most MaxBatchFile bytes.
	Body io.Reader
}

// SaveFile writes an uploaded file to the batch directory and stores its
// row (SpoolFile, then Keep).
func (e *Engine) SaveFile(ctx context.Context, up Upload) (*store.File, *adapters.Error) {
	sp, ae := e.SpoolFile(up.Body)
	if ae != nil {
		return nil, ae
	}
	defer sp.Discard()
	return e.Keep(ctx, sp, up)
}

// Spooled is an upload written to a temporary file, its lines counted,
// not yet kept: a multipart upload may name its purpose after its file.
type Spooled struct {
	tmp          *os.File
	bytes, lines int64
}

// Discard removes the temporary file (a no-op once kept).
func (sp *Spooled) Discard() {
	sp.tmp.Close()
	os.Remove(sp.tmp.Name())
}

// SpoolFile writes body to a temporary file in the batch directory, at
// most MaxBatchFile bytes, counting its lines.
func (e *Engine) SpoolFile(body io.Reader) (*Spooled, *adapters.Error) {
	if err := os.MkdirAll(e.cfg.BatchDir, 0o700); err != nil {
		e.deps.Log.Error("making the batch directory", zap.String("dir", e.cfg.BatchDir), zap.Error(err))
		return nil, unavailable()
	}
	tmp, err := os.CreateTemp(e.cfg.BatchDir, ".upload-*")
	if err != nil {
		e.deps.Log.Error("writing an uploaded file", zap.Error(err))
		return nil, unavailable()
	}
	sp := &Spooled{tmp: tmp}
	lc := &lineCounter{w: tmp}
	n, err := io.Copy(lc, io.LimitReader(body, e.cfg.MaxBatchFile+1))
	if err != nil {
		sp.Discard()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(e.cfg.MaxBatchFile)
		}
		return nil, adapters.BadRequest("the file could not be read: %v", err)
	}
	if n > e.cfg.MaxBatchFile {
		sp.Discard()
		return nil, tooLarge(e.cfg.MaxBatchFile)
	}
	sp.bytes, sp.lines = n, lc.lines
	if lc.open {
		sp.lines++
	}
	return sp, nil
}

// Keep stores a spooled file as up names it (its body unused): a file of
// purpose batch holds at most MaxBatchLines lines.
func (e *Engine) Keep(ctx context.Context, sp *Spooled, up Upload) (*store.File, *adapters.Error) {
	if up.Purpose == "batch" && sp.lines > int64(e.cfg.MaxBatchLines) {
		ae := adapters.BadRequest("the file has more than %d lines, the most a batch takes on this gateway (batches max_lines): split it into several batches", e.cfg.MaxBatchLines)
		ae.Code = "too_many_lines"
		return nil, ae
	}
	used, err := e.deps.Store.UserFileBytes(ctx, up.UserID)
	if err != nil {
		e.deps.Log.Error("reading a user's stored bytes", zap.Error(err))
		return nil, unavailable()
	}
	if used+sp.bytes > e.cfg.MaxUserFiles {
		ae := adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrInvalidRequest,
			"your files would take more than %d bytes, the most this gateway keeps for one account (batches max_user_storage): delete files you no longer need", e.cfg.MaxUserFiles)
		ae.Code = "storage_limit_exceeded"
		return nil, ae
	}
	if err := sp.tmp.Sync(); err != nil {
		e.deps.Log.Error("writing an uploaded file", zap.Error(err))
		return nil, unavailable()
	}
	f := &store.File{ID: newFileID(), UserID: up.UserID, Purpose: up.Purpose, Filename: up.Filename, Bytes: sp.bytes, Lines: sp.lines}
	if e.cfg.FileRetention > 0 {
		f.ExpiresAt = time.Now().Add(e.cfg.FileRetention)
	}
	if err := os.Rename(sp.tmp.Name(), e.filePath(f.ID)); err != nil {
		e.deps.Log.Error("writing an uploaded file", zap.Error(err))
		return nil, unavailable()
	}
	if err := e.deps.Store.CreateFile(ctx, f); err != nil {
		os.Remove(e.filePath(f.ID))
		e.deps.Log.Error("storing a file's row", zap.Error(err))
		return nil, unavailable()
	}
	return f, nil
}

// MaxLines is the most requests of one batch (batches max_lines).
func (e *Engine) MaxLines() int { return e.cfg.MaxBatchLines }

// MaxFile is the largest file kept (batches max_file_size).
func (e *Engine) MaxFile() int64 { return e.cfg.MaxBatchFile }

func tooLarge(max int64) *adapters.Error {
	e := adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrInvalidRequest,
		"the file is larger than %d bytes, the largest this gateway keeps (batches max_file_size): split it", max)
	e.Code = "file_too_large"
	return e
}

func unavailable() *adapters.Error {
	return adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot store files right now; try again shortly")
}

// lineCounter counts the lines written through it.
type lineCounter struct {
	w     io.Writer
	lines int64
	open  bool // the last line has no newline yet
}

func (c *lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			if c.open {
				c.lines++
			}
			c.open = false
		} else if b != '\r' && b != ' ' && b != '\t' {
			c.open = true
		}
	}
	return c.w.Write(p)
}

// File returns the user's file id; another user's is not found.
func (e *Engine) File(ctx context.Context, userID int64, id string) (*store.File, *adapters.Error) {
	f, err := e.deps.Store.FileByID(ctx, id)
	if err != nil || f.UserID != userID || (!f.ExpiresAt.IsZero() && time.Now().After(f.ExpiresAt)) {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.deps.Log.Error("reading a file's row", zap.Error(err))
			return nil, unavailable()
		}
		return nil, FileNotFound(id)
	}
	return f, nil
}

// OpenFile opens the user's file id for reading.
func (e *Engine) OpenUserFile(ctx context.Context, userID int64, id string) (*store.File, *os.File, *adapters.Error) {
	f, ae := e.File(ctx, userID, id)
	if ae != nil {
		return nil, nil, ae
	}
	r, err := os.Open(e.filePath(f.ID))
	if err != nil {
		e.deps.Log.Error("a file's bytes are missing from the batch directory", zap.String("file_id", f.ID), zap.Error(err))
		return nil, nil, FileNotFound(id)
	}
	return f, r, nil
}

// ListFiles lists the user's files, newest first.
func (e *Engine) ListFiles(ctx context.Context, userID int64, purpose, after string, limit int) ([]*store.File, *adapters.Error) {
	fs, err := e.deps.Store.ListFiles(ctx, userID, purpose, after, limit)
	if err != nil {
		e.deps.Log.Error("listing files", zap.Error(err))
		return nil, unavailable()
	}
	return fs, nil
}

// DeleteFile deletes the user's file id, its row then its bytes.
func (e *Engine) DeleteFile(ctx context.Context, userID int64, id string) *adapters.Error {
	if err := e.deps.Store.DeleteFile(ctx, userID, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return FileNotFound(id)
		}
		e.deps.Log.Error("deleting a file", zap.Error(err))
		return unavailable()
	}
	if err := os.Remove(e.filePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		e.deps.Log.Warn("deleting a file's bytes", zap.String("file_id", id), zap.Error(err))
	}
	return nil
}

// sweepFiles deletes the files past their retention, a page at a time.
func (e *Engine) sweepFiles(ctx context.Context) {
	fs, err := e.deps.Store.ExpiredFiles(ctx, time.Now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Warn("finding expired files", zap.Error(err))
		}
		return
	}
	for _, f := range fs {
		if err := e.deps.Store.DeleteFile(ctx, f.UserID, f.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			e.deps.Log.Warn("deleting an expired file", zap.String("file_id", f.ID), zap.Error(err))
			continue
		}
		if err := os.Remove(e.filePath(f.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.deps.Log.Warn("deleting an expired file's bytes", zap.String("file_id", f.ID), zap.Error(err))
		}
	}
}

// derived is a batch's output or error file being written: a temporary
// file renamed into place under its derived id when the batch settles.
type derived struct {
	tmp          *os.File
	bytes, lines int64
}

func (e *Engine) newDerived() (*derived, error) {
	if err := os.MkdirAll(e.cfg.BatchDir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(e.cfg.BatchDir, ".output-*")
	if err != nil {
		return nil, err
	}
	return &derived{tmp: tmp}, nil
}

func (d *derived) write(line []byte) error {
	n, err := d.tmp.Write(append(line, '\n'))
	d.bytes += int64(n)
	d.lines++
	return err
}

// discard removes what was written.
func (d *derived) discard() {
	d.tmp.Close()
	os.Remove(d.tmp.Name())
}

// commit puts the file in place of any earlier attempt's and stores its
// row once.
func (e *Engine) commit(ctx context.Context, d *derived, f *store.File) error {
	defer d.discard()
	if err := d.tmp.Sync(); err != nil {
		return err
	}
	if err := d.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(d.tmp.Name(), e.filePath(f.ID)); err != nil {
		return err
	}
	f.Bytes, f.Lines = d.bytes, d.lines
	if err := e.deps.Store.CreateFile(ctx, f); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("storing the row of file %s: %w", f.ID, err)
	}
	return nil
}
