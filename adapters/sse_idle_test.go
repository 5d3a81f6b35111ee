package adapters

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// chunks is a body that gives one chunk per Read, as an upstream's
// events arrive one by one, and notes what the reader held at each.
type chunks struct {
	parts []string
	sr    *SSEReader
	// held[i]: the reader held its buffers during read i; size[i]: the
	// room that read had
	held []bool
	size []int
}

func (c *chunks) Read(p []byte) (int, error) {
	c.held = append(c.held, c.sr.sseBuffers != nil)
	c.size = append(c.size, len(p))
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// An SSE reader waiting for an upstream's next event holds no buffer but
// its own few bytes: thousands of streams wait at once.
func TestSSEReaderHoldsNoBufferBetweenEvents(t *testing.T) {
	long := "data: " + strings.Repeat("x", 300) + "\n\n" // past the wait's 64 bytes
	body := &chunks{parts: []string{"data: a\n\n", long, ": keep-alive\n\n", "event: e\ndata: b\n\n"}}
	s := NewSSEReader(body)
	body.sr = s
	defer s.Release()
	var got []string
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Name+"|"+string(ev.Data))
	}
	want := []string{"|a", "|" + strings.Repeat("x", 300), "e|b"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events %q, want %q", got, want)
	}
	// each event's first read came with no buffer held, into 64 bytes
	waits := 0
	for i, held := range body.held {
		if !held {
			waits++
			if body.size[i] > 64 {
				t.Errorf("read %d waited with %d bytes of room, want at most 64", i, body.size[i])
			}
		}
	}
	if waits < 4 {
		t.Errorf("%d reads waited without buffers (held: %v), want one per event and the end", waits, body.held)
	}
}

// Bytes split anywhere, and an error that comes with the last bytes,
// read as from one piece.
func TestSSEReaderWaitSplits(t *testing.T) {
	const stream = "data: {\"a\":1}\n\nevent: x\ndata: y\ndata: z\n\ndata: end"
	for name, r := range map[string]io.Reader{
		"one byte":       iotest.OneByteReader(strings.NewReader(stream)),
		"error and data": iotest.DataErrReader(strings.NewReader(stream)),
		"half":           iotest.HalfReader(strings.NewReader(stream)),
	} {
		s := NewSSEReader(r)
		var got []string
		for {
			ev, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, ev.Name+"|"+string(ev.Data))
		}
		s.Release()
		if want := `|{"a":1},x|y` + "\n" + `z,|end`; strings.Join(got, ",") != want {
			t.Errorf("%s: events %q, want %q", name, strings.Join(got, ","), want)
		}
	}
}
