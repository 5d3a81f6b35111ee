package billing

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/caddy-model-gateway/gateway/store"
)

// inflightLog is where a request's usage row goes the moment it is
// written, before the writer commits it: a process killed between the
// answer and the commit leaves the row here, and the next start replays it
// (rows are keyed, so one also committed is skipped). Appends are not
// synced: what a killed process wrote is in the kernel's page cache and
// survives it; only the machine losing power can lose it, as it can the
// database's last commits (synchronous=NORMAL). That keeps a row's cost
// to one write(2), with no wait for a commit on the request's path; on
// Linux not even that: a segment's blocks are allocated up front and the
// file is mapped shared, so a row is a copy into the page cache (what a
// killed process copied there stays, as a write's bytes do). The mapped
// file's unused tail is zeros, which a reader skips.
//
// The log is a series of segment files; rows are appended to the newest,
// and a segment past segmentSize is sealed and removed once every row in
// it is recorded (committed, or synced to the journal).
type inflightLog struct {
	prefix string // segment paths are prefix + a number

	mu   sync.Mutex
	cur  *segment
	next int
}

// segmentSize is when a segment is sealed: small enough that a restart
// reads little, large enough that rotation is rare.
const segmentSize = 1 << 20

// mapSegmentFile is mapSegment; a test makes it fail, as a full disk does.
var mapSegmentFile = mapSegment

// segment is one file of the inflight log. pending and sealed are guarded
// by the log's mu.
type segment struct {
	f       *os.File
	m       []byte // the file mapped, when it is (mapSegment); rows are copied in
	path    string
	size    int64
	pending int // rows written here and not yet recorded
	sealed  bool
}

// inflightGlob matches every segment of the log beside journal, whichever
// writer (run) made it.
func inflightGlob(journal string) string { return journal + ".inflight-*" }

func newInflightLog(journal, run string) *inflightLog {
	return &inflightLog{prefix: journal + ".inflight-" + run}
}

// append writes row to the current segment and returns that segment, to
// be handed to recorded once the row is; nil when the row could not be
// written (the row is then only as safe as before this log existed).
func (l *inflightLog) append(row *store.UsageLog) (*segment, error) {
	buf := lineBuffers.Get().(*[]byte)
	line := append(appendRow((*buf)[:0], row), '\n')
	defer func() {
		if cap(line) <= 64<<10 { // a row with a huge error text is not kept
			*buf = line[:0]
			lineBuffers.Put(buf)
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.cur; s == nil || s.size >= segmentSize || s.m != nil && s.size+int64(len(line)) > int64(len(s.m)) {
		if err := l.rotate(len(line)); err != nil {
			return nil, err
		}
	}
	s := l.cur
	if s.m != nil {
		s.size += int64(copy(s.m[s.size:], line))
		s.pending++
		return s, nil
	}
	n, err := s.f.Write(line)
	s.size += int64(n)
	if err != nil {
		// a torn line is skipped on replay; start the next row on a
		// fresh segment so it is not glued to the tear
		s.size = segmentSize
		return nil, fmt.Errorf("inflight usage log: writing %s: %w", s.path, err)
	}
	s.pending++
	return s, nil
}

// rotate seals the current segment (removing it when nothing in it is
// pending) and opens the next, with room for a line of need bytes. Called
// with mu held.
func (l *inflightLog) rotate(need int) error {
	if old := l.cur; old != nil {
		old.sealed = true
		l.cur = nil
		if old.pending == 0 {
			old.remove()
		} else {
			old.unmap(true) // nothing more is written to it
		}
	}
	path := fmt.Sprintf("%s-%d", l.prefix, l.next)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("inflight usage log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("inflight usage log: %w", err)
	}
	lockSegment(f)
	l.next++
	// where mapping fails (no room for the blocks, a file system without
	// fallocate, not Linux) the segment is written with write(2)
	m, _ := mapSegmentFile(f, max(segmentSize, need))
	l.cur = &segment{f: f, m: m, path: path}
	return nil
}

// recorded tells the log that rows written to segs are recorded elsewhere;
// a sealed segment with nothing pending is removed.
func (l *inflightLog) recorded(segs []*segment) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range segs {
		if s == nil {
			continue
		}
		s.pending--
		if s.pending == 0 && s.sealed {
			s.remove()
		}
	}
}

// close closes the log; with every row recorded its segments are removed,
// otherwise those holding unrecorded rows stay for the next start.
func (l *inflightLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.cur; s != nil {
		s.sealed = true
		l.cur = nil
		if s.pending == 0 {
			s.remove()
		} else {
			s.unmap(true)
			_ = s.f.Close()
		}
	}
}

func (s *segment) remove() {
	s.unmap(false)
	_ = s.f.Close()
	_ = os.Remove(s.path)
}

// unmap lets go of a mapped segment's memory; with trim, the file is cut
// to its rows, dropping the zeros after them.
func (s *segment) unmap(trim bool) {
	if s.m == nil {
		return
	}
	unmapSegment(s.m)
	s.m = nil
	if trim {
		_ = s.f.Truncate(s.size)
	}
}

// leftInflight reads the segments an earlier run left beside journal (a
// kill, or rows nothing would take at its stop): their rows, and their
// paths to remove once the rows are safe elsewhere.
func leftInflight(journal string) (rows []*store.UsageLog, paths []string, bad int, err error) {
	paths, err = filepath.Glob(inflightGlob(journal))
	if err != nil {
		return nil, nil, 0, err
	}
	paths = slices.DeleteFunc(paths, segmentInUse)
	for _, p := range paths {
		r, b, e := readRows(p)
		rows, bad = append(rows, r...), bad+b
		err = errors.Join(err, e)
	}
	return rows, paths, bad, err
}
