package billing

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// A killed process leaves its current segment as it was: on Linux a
// mapped file of segmentSize bytes, its rows followed by zeros (and a row
// the kill cut, by zeros after its start). Every whole row is read back,
// the cut one counted bad, the zeros not at all; a row larger than a
// segment gets a segment of its own.
func TestInflightSegmentsReadBackAfterAKill(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	l := newInflightLog(journal, "run")
	big := strings.Repeat("x", segmentSize+100)
	for i, e := range []string{"", "a", big, "b"} {
		row := &store.UsageLog{Key: "k" + string(rune('0'+i)), UserID: 7, Cost: int64(i), Error: e}
		if _, err := l.append(row); err != nil {
			t.Fatal(err)
		}
	}
	cur := l.cur
	if runtime.GOOS == "linux" && cur.m == nil {
		t.Fatal("the segment was not mapped: rows cost a write(2) each")
	}
	// a kill while a row is copied in: its first bytes, then zeros
	if cur.m != nil {
		line := appendRow(nil, &store.UsageLog{Key: "cut", UserID: 7})
		copy(cur.m[cur.size:], line[:len(line)/2])
	}
	// the kill: nothing is closed, trimmed or unmapped
	paths, _ := filepath.Glob(inflightGlob(journal))
	if len(paths) != 3 {
		t.Fatalf("segments %v, want 3 (the big row in one of its own)", paths)
	}
	if cur.m != nil {
		fi, err := os.Stat(cur.path)
		if err != nil || fi.Size() != segmentSize {
			t.Fatalf("the mapped segment is %v bytes (%v), want %d", fi.Size(), err, segmentSize)
		}
	}
	var keys []string
	bad := 0
	for _, p := range paths {
		rows, b, err := readRows(p)
		if err != nil {
			t.Fatal(err)
		}
		bad += b
		for _, r := range rows {
			keys = append(keys, r.Key)
		}
	}
	if strings.Join(keys, ",") != "k0,k1,k2,k3" {
		t.Fatalf("rows read back: %v", keys)
	}
	if want := map[bool]int{true: 1, false: 0}[cur.m != nil]; bad != want {
		t.Fatalf("%d bad lines, want %d (the cut row only)", bad, want)
	}
}

// A clean stop with rows pending cuts the mapped segment to its rows.
func TestInflightSegmentTrimmedAtClose(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	l := newInflightLog(journal, "run")
	s, err := l.append(&store.UsageLog{Key: "k", UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	size := s.size
	l.close()
	fi, err := os.Stat(s.path)
	if err != nil || fi.Size() != size {
		t.Fatalf("segment after close: %v (%v), want %d bytes", fi, err, size)
	}
	rows, bad, err := readRows(s.path)
	if err != nil || bad != 0 || len(rows) != 1 || rows[0].Key != "k" {
		t.Fatalf("rows %v, bad %d, err %v", rows, bad, err)
	}
}

// One writer's row keys sort in the order they were made, so the usage
// table's unique index on them grows at its end.
func TestRowKeysSortInOrder(t *testing.T) {
	prev := rowKey("p-", 0)
	for _, n := range []uint64{1, 9, 10, 35, 36, 37, 1295, 1296, 1 << 40, 1<<64 - 1} {
		k := rowKey("p-", n)
		if k <= prev || len(k) != len(prev) {
			t.Fatalf("key %d = %q does not sort after %q", n, k, prev)
		}
		prev = k
	}
}

// Where a segment cannot be mapped (no room for its blocks, a file system
// without fallocate), rows are written with write(2) and read back alike.
func TestInflightSegmentUnmappable(t *testing.T) {
	mapSegmentFile = func(*os.File, int) ([]byte, error) { return nil, errors.New("no space left on device") }
	defer func() { mapSegmentFile = mapSegment }()
	journal := filepath.Join(t.TempDir(), "journal")
	l := newInflightLog(journal, "run")
	var seg *segment
	for _, k := range []string{"a", "b"} {
		s, err := l.append(&store.UsageLog{Key: k, UserID: 3})
		if err != nil {
			t.Fatal(err)
		}
		seg = s
	}
	if seg.m != nil {
		t.Fatal("the segment is mapped although mapping failed")
	}
	fi, err := os.Stat(seg.path)
	if err != nil || fi.Size() != seg.size {
		t.Fatalf("segment %v (%v), want %d bytes of rows and nothing after", fi, err, seg.size)
	}
	rows, bad, err := readRows(seg.path)
	if err != nil || bad != 0 || len(rows) != 2 || rows[0].Key != "a" || rows[1].Key != "b" {
		t.Fatalf("rows %v, bad %d, err %v", rows, bad, err)
	}
}
