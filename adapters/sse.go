package adapters

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// SSEEvent is one server-sent event. Its slices point into the reader's
// buffer and are valid only until the next call to Next.
type SSEEvent struct {
	Name string // the event: field, "" when absent
	Data []byte // data: lines joined with \n
	// Raw is the whole frame as received, blank-line terminator included.
	Raw []byte
}

// SSEReader splits a text/event-stream body into events without copying
// each line: it keeps one frame buffer and reuses it.
//
// Between events it holds no buffer: a stream waits for its upstream's
// next event for most of its life (thousands at once, each for minutes),
// so the read buffer and the frame buffers go back to a pool once an
// event is returned and nothing more has arrived, and the wait is a read
// of a few bytes into the reader itself (wait).
type SSEReader struct {
	*sseBuffers // nil while the reader waits for the next bytes
	body        io.Reader
	// head is what the wait read, for br to read first; headErr is that
	// read's error, returned once head is read
	head    []byte
	headErr error
	small   [64]byte
	ev      SSEEvent
	// max bounds one event's frame in bytes; 0: unbounded.
	max int
	// read counts the body's bytes read as lines, keep-alives included
	read int64
}

// ErrEventTooLarge is returned by SSEReader.Next for an event longer than
// the reader's limit; the stream cannot go on after it.
var ErrEventTooLarge = errors.New("stream event too large")

// SetMaxEvent bounds one event's frame to n bytes (0: unbounded).
func (s *SSEReader) SetMaxEvent(n int) { s.max = n }

// sseBuffers are what a reader holds while it reads an event: the body's
// bytes and the event's frame and data.
type sseBuffers struct {
	br    *bufio.Reader
	frame []byte
	data  []byte
}

// sseReaders recycles readers between streams, sseBufferPool their
// buffers between events.
var (
	sseReaders    = sync.Pool{New: func() any { return new(SSEReader) }}
	sseBufferPool = sync.Pool{New: func() any {
		return &sseBuffers{br: bufio.NewReaderSize(nil, 2<<10), frame: make([]byte, 0, 512), data: make([]byte, 0, 512)}
	}}
)

// NewSSEReader reads events from r. Its buffer is small because a gateway
// holds thousands of streams open; a longer line is gathered piece by piece.
// Release gives it back for the next stream.
func NewSSEReader(r io.Reader) *SSEReader {
	s := sseReaders.Get().(*SSEReader)
	s.body = r
	return s
}

// Release returns the reader for reuse; neither it nor any event it
// returned may be used afterwards.
func (s *SSEReader) Release() {
	s.putBuffers()
	*s = SSEReader{}
	sseReaders.Put(s)
}

// putBuffers gives the buffers back, unless an outsized event grew them.
func (s *SSEReader) putBuffers() {
	b := s.sseBuffers
	if b == nil {
		return
	}
	s.sseBuffers = nil
	if cap(b.frame) > 64<<10 || cap(b.data) > 64<<10 {
		return // let them go
	}
	b.br.Reset(nil)
	b.frame, b.data = b.frame[:0], b.data[:0]
	sseBufferPool.Put(b)
}

// wait reads the body's next bytes holding no buffer but the reader's
// few, then takes buffers for the event: called when everything read so
// far has been returned.
func (s *SSEReader) wait() {
	s.putBuffers()
	n, err := s.body.Read(s.small[:])
	s.head, s.headErr = s.small[:n], err
	s.sseBuffers = sseBufferPool.Get().(*sseBuffers)
	s.br.Reset((*sseHead)(s))
}

// sseHead reads what wait read, then the body.
type sseHead SSEReader

func (h *sseHead) Read(p []byte) (int, error) {
	if len(h.head) > 0 || h.headErr != nil {
		n := copy(p, h.head)
		h.head = h.head[n:]
		if len(h.head) > 0 {
			return n, nil
		}
		err := h.headErr
		h.headErr = nil
		return n, err
	}
	return h.body.Read(p)
}

// BytesRead is how many bytes of the body Next has read so far.
func (s *SSEReader) BytesRead() int64 { return s.read }

// Buffered reports whether bytes of a next event have already arrived.
func (s *SSEReader) Buffered() bool {
	return s.sseBuffers != nil && (s.br.Buffered() > 0 || len(s.head) > 0)
}

// Next returns the next event that has data or a name; comment-only frames
// (keep-alives) are skipped. It returns io.EOF at the end of the body; a
// final frame without its blank line is still returned.
func (s *SSEReader) Next() (*SSEEvent, error) {
	if !s.Buffered() {
		s.wait()
	}
	for {
		s.frame = s.frame[:0]
		s.data = s.data[:0]
		name := ""
		hasData := false
		for {
			line, err := s.br.ReadSlice('\n')
			s.read += int64(len(line))
			if err == bufio.ErrBufferFull {
				// a line longer than the buffer: gather it whole
				buf := append([]byte(nil), line...)
				for err == bufio.ErrBufferFull {
					if s.max > 0 && len(s.frame)+len(buf) > s.max {
						return nil, ErrEventTooLarge
					}
					line, err = s.br.ReadSlice('\n')
					s.read += int64(len(line))
					buf = append(buf, line...)
				}
				line = buf
			}
			if s.max > 0 && len(s.frame)+len(line) > s.max {
				return nil, ErrEventTooLarge
			}
			if len(line) == 0 && err != nil {
				if len(s.frame) > 0 && (hasData || name != "") {
					return s.emit(name), nil
				}
				return nil, err
			}
			s.frame = append(s.frame, line...)
			trimmed := bytes.TrimRight(line, "\r\n")
			if len(trimmed) == 0 {
				if hasData || name != "" {
					return s.emit(name), nil
				}
				s.frame = s.frame[:0]
				if err != nil {
					return nil, err
				}
				continue
			}
			field, value := trimmed, []byte(nil)
			if i := bytes.IndexByte(trimmed, ':'); i >= 0 {
				field, value = trimmed[:i], trimmed[i+1:]
				if len(value) > 0 && value[0] == ' ' {
					value = value[1:]
				}
			}
			switch string(field) {
			case "data":
				if hasData {
					s.data = append(s.data, '\n')
				}
				s.data = append(s.data, value...)
				hasData = true
			case "event":
				name = string(value)
			}
			if err != nil {
				if hasData || name != "" {
					return s.emit(name), nil
				}
				return nil, err
			}
		}
	}
}

func (s *SSEReader) emit(name string) *SSEEvent {
	s.ev = SSEEvent{Name: name, Data: s.data, Raw: s.frame}
	return &s.ev
}

// AppendSSE appends one event frame: an optional event: line, one data:
// line (data must not contain newlines; JSON from encoding/json never does)
// and the blank line.
func AppendSSE(dst []byte, name string, data []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}
