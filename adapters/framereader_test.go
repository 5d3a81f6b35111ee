package adapters

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// lineFrames is a provider whose stream is one event a line ("name data"),
// to show the host reads a FrameReader's events with the family's step.
type lineFrames struct{}

func (lineFrames) Type() string                   { return "lines" }
func (lineFrames) DecodeError(int, []byte) *Error { return nil }
func (lineFrames) WireDialect() string            { return "lines" }
func (lineFrames) NewRequest(context.Context, *Upstream, *Request) (*http.Request, error) {
	return nil, nil
}
func (lineFrames) DecodeResponse(*Request, []byte) (*Response, error) { return nil, nil }
func (lineFrames) NewStreamStep(*Request) StreamStep                  { return lineStep{} }
func (lineFrames) NewEventReader(body io.Reader) EventReader {
	return &lineReader{r: body}
}

type lineReader struct {
	r   io.Reader
	buf [64]byte
	ev  SSEEvent
	max int
}

func (l *lineReader) SetMaxEvent(n int) { l.max = n }
func (l *lineReader) Buffered() bool    { return false }
func (l *lineReader) Release()          {}
func (l *lineReader) BytesRead() int64  { return 0 }
func (l *lineReader) Next() (*SSEEvent, error) {
	n := 0
	for {
		if l.max > 0 && n >= l.max {
			return nil, ErrEventTooLarge
		}
		if _, err := l.r.Read(l.buf[n : n+1]); err != nil {
			return nil, err
		}
		if l.buf[n] == '\n' {
			break
		}
		n++
	}
	name, data, _ := bytes.Cut(l.buf[:n], []byte{' '})
	l.ev = SSEEvent{Name: string(name), Data: data, Raw: l.buf[:n+1]}
	return &l.ev, nil
}

type lineStep struct{}

func (lineStep) Translate(out []*StreamEvent, ev *SSEEvent) ([]*StreamEvent, StreamEnd, error) {
	if ev.Name == "end" {
		return out, StreamEnds, nil
	}
	return append(out, &StreamEvent{Type: EventTextDelta, Text: string(ev.Data)}), StreamGoesOn, nil
}
func (lineStep) Probe(*SSEEvent) (*Usage, StreamEnd, error) { return nil, StreamGoesOn, nil }
func (lineStep) DeltaText([]byte) string                    { return "" }

// TestFrameReaderHook: DecodeStream reads a FrameReader family's body with
// its own reader, through the same loop (a cut before the end is a
// cut-off), and the host's bound on one event reaches the reader.
func TestFrameReaderHook(t *testing.T) {
	var p ChatProvider = lineFrames{}
	dec := DecodeStream(p, &Request{Dialect: "openai"}, strings.NewReader("text hello\ntext world\nend x\n"))
	var got string
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got += ev.Text
	}
	if got != "helloworld" {
		t.Errorf("events %q", got)
	}
	if _, err := DecodeStream(p, &Request{Dialect: "openai"}, strings.NewReader("text hello\n")).Next(); err != nil {
		t.Fatal(err)
	}
	dec = DecodeStream(p, &Request{Dialect: "openai"}, strings.NewReader("text hello\n"))
	dec.Next()
	if _, err := dec.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body cut before its end: %v", err)
	}
	dec = DecodeStream(p, &Request{Dialect: "openai"}, strings.NewReader("text a-long-event\n"))
	dec.SetMaxEvent(8)
	if _, err := dec.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("the bound did not reach the reader: %v", err)
	}
}
