package billing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/caddy-model-gateway/gateway/store"
)

// Journal is an append-only file of usage rows the store would not take.
// A batch is appended as JSON lines and synced to disk before its rows
// count as recorded; Replay commits them to the store and empties the file.
// Rows carry keys the store refuses to write twice, so a replay cut short
// after its commit and run again charges nothing twice.
//
// It is used by one goroutine at a time (the writer serializes it).
type Journal struct {
	path string
	f    *os.File // open for appending once the first batch needs it
}

// OpenJournal returns the journal at path; the file is created only when a
// batch is first written to it.
func OpenJournal(path string) *Journal {
	return &Journal{path: path}
}

// Path is where the journal lives.
func (j *Journal) Path() string { return j.path }

// Append writes rows and syncs them to disk. On failure nothing of the
// batch is left behind (the file is cut back to where it was), so the same
// rows can be appended again later.
func (j *Journal) Append(rows []*store.UsageLog) error {
	if len(rows) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("journal: encoding a usage row: %w", err)
		}
	}
	if j.f == nil {
		if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		j.f = f
	}
	size := int64(-1)
	if fi, err := j.f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	_, err := j.f.Write(buf.Bytes())
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		// cut a torn batch off, so the next line starts on a line of its
		// own; and reopen next time, in case the file was replaced
		if size >= 0 {
			_ = j.f.Truncate(size)
		}
		_ = j.f.Close()
		j.f = nil
		return fmt.Errorf("journal: writing %d usage rows to %s: %w", len(rows), j.path, err)
	}
	return nil
}

// Rows reads every row in the journal, oldest first. A line that does not
// parse (the tail of a batch cut by a crash before its sync returned) is
// skipped and counted in bad.
func (j *Journal) Rows() (rows []*store.UsageLog, bad int, err error) {
	return readRows(j.path)
}

// readRows reads a file of usage rows as JSON lines, as Journal.Rows says.
func readRows(path string) (rows []*store.UsageLog, bad int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, nil // a device or the like: it holds no rows
	}
	rd := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := rd.ReadBytes('\n')
		// a mapped inflight segment ends in zeros after its last row
		// (and a row cut by a kill, in zeros after its start)
		line = bytes.TrimRight(line, "\x00")
		if len(bytes.TrimSpace(line)) > 0 {
			var r store.UsageLog
			if json.Unmarshal(line, &r) == nil && r.Key != "" {
				rows = append(rows, &r)
			} else {
				bad++
			}
		}
		if errors.Is(err, io.EOF) {
			return rows, bad, nil
		}
		if err != nil {
			return rows, bad, fmt.Errorf("journal: reading %s: %w", path, err)
		}
	}
}

// Clear empties the journal once its rows are in the store.
func (j *Journal) Clear() error {
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	fi, err := os.Stat(j.path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.Mode().IsRegular() {
		return nil
	}
	if err == nil {
		err = os.Truncate(j.path, 0)
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// Close closes the file, if it is open.
func (j *Journal) Close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
