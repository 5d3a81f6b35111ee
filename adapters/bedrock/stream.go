package bedrock

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// NewStreamStep implements adapters.ChatProvider.
func (Adapter) NewStreamStep(*adapters.Request) adapters.StreamStep { return &streamStep{} }

// NewEventReader implements adapters.FrameReader: ConverseStream answers
// in AWS's event-stream framing (application/vnd.amazon.eventstream), not
// SSE.
func (Adapter) NewEventReader(body io.Reader) adapters.EventReader {
	r := frameReaders.Get().(*frameReader)
	r.br.Reset(body)
	return r
}

// exceptionPrefix starts the name of an event that is an exception or an
// error frame (:message-type exception or error), not an event.
const exceptionPrefix = "exception:"

// maxFrame bounds a frame when the host sets no bound: AWS's event-stream
// messages carry at most 16 MiB of payload and 128 KiB of headers.
const maxFrame = 16<<20 + 128<<10 + 16

// frameReader reads event-stream frames one at a time: the 12-byte
// prelude says the frame's length, which is checked against the bound
// before the frame is read whole into a reused buffer; the SDK's decoder
// then checks both CRCs and splits headers from payload. An event's Name
// is its :event-type (or exceptionPrefix and its :exception-type), Data
// its JSON payload, Raw the whole frame; all valid until the next Next.
type frameReader struct {
	br      *bufio.Reader
	frame   []byte
	payload []byte
	dec     *eventstream.Decoder
	rd      bytes.Reader // over frame, for dec
	ev      adapters.SSEEvent
	max     int
	read    int64 // bytes of whole frames read, for BytesRead
}

var frameReaders = sync.Pool{New: func() any {
	return &frameReader{br: bufio.NewReaderSize(nil, 2<<10), dec: eventstream.NewDecoder()}
}}

// SetMaxEvent implements adapters.EventReader.
func (r *frameReader) SetMaxEvent(n int) { r.max = n }

// Buffered implements adapters.EventReader.
func (r *frameReader) Buffered() bool { return r.br.Buffered() > 0 }

// BytesRead implements adapters.EventReader.
func (r *frameReader) BytesRead() int64 { return r.read }

// Release implements adapters.EventReader.
func (r *frameReader) Release() {
	if cap(r.frame) > 64<<10 || cap(r.payload) > 64<<10 {
		return // an outsized stream: let its buffers go
	}
	r.br.Reset(nil)
	r.frame, r.payload, r.ev, r.max, r.read = r.frame[:0], r.payload[:0], adapters.SSEEvent{}, 0, 0
	frameReaders.Put(r)
}

// errBadFrame is a frame whose framing is broken; the stream cannot go on.
var errBadFrame = errors.New("upstream sent a malformed event-stream frame")

// Next implements adapters.EventReader.
func (r *frameReader) Next() (*adapters.SSEEvent, error) {
	var prelude [12]byte
	if _, err := io.ReadFull(r.br, prelude[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err // io.EOF between frames: the body's end
	}
	total := int(binary.BigEndian.Uint32(prelude[0:4]))
	headers := int(binary.BigEndian.Uint32(prelude[4:8]))
	limit := maxFrame
	if r.max > 0 {
		limit = min(r.max, maxFrame)
	}
	if total > limit {
		return nil, adapters.ErrEventTooLarge
	}
	if total < 16 || headers > total-16 {
		return nil, errBadFrame
	}
	if cap(r.frame) < total {
		r.frame = make([]byte, total)
	}
	r.frame = r.frame[:total]
	copy(r.frame, prelude[:])
	if _, err := io.ReadFull(r.br, r.frame[12:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.read += int64(total)
	r.rd.Reset(r.frame)
	m, err := r.dec.Decode(&r.rd, r.payload[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadFrame, err)
	}
	r.payload = m.Payload
	r.ev = adapters.SSEEvent{Data: m.Payload, Raw: r.frame}
	switch header(m.Headers, ":message-type") {
	case "event":
		r.ev.Name = header(m.Headers, ":event-type")
	case "exception":
		r.ev.Name = exceptionPrefix + header(m.Headers, ":exception-type")
	case "error":
		// an error frame carries its code and message in headers
		r.ev.Name = exceptionPrefix + header(m.Headers, ":error-code")
		r.ev.Data, _ = json.Marshal(errorBody{Message: header(m.Headers, ":error-message")})
	default:
		return nil, fmt.Errorf("%w: :message-type %q", errBadFrame, header(m.Headers, ":message-type"))
	}
	return &r.ev, nil
}

func header(hs eventstream.Headers, name string) string {
	if v := hs.Get(name); v != nil {
		if s, ok := v.(eventstream.StringValue); ok {
			return string(s)
		}
		return v.String()
	}
	return ""
}

// streamStep reads ConverseStream's events: messageStart,
// contentBlockStart/Delta/Stop, messageStop (the stop reason; the body may
// end after it) and metadata (the usage, last).
type streamStep struct{}

// Translate implements adapters.StreamStep.
func (s *streamStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	if len(ev.Name) > len(exceptionPrefix) && ev.Name[:len(exceptionPrefix)] == exceptionPrefix {
		return out, adapters.StreamGoesOn, streamError(ev.Name[len(exceptionPrefix):], ev.Data)
	}
	switch ev.Name {
	case "messageStart", "contentBlockStart", "contentBlockDelta", "messageStop", "metadata":
	default:
		return out, adapters.StreamGoesOn, nil // contentBlockStop, and event types added later
	}
	var p streamPayload
	if err := json.Unmarshal(ev.Data, &p); err != nil {
		return out, adapters.StreamGoesOn, fmt.Errorf("upstream sent an invalid %s event: %w", ev.Name, err)
	}
	i := p.ContentBlockIndex
	switch ev.Name {
	case "messageStart":
		return append(out, &adapters.StreamEvent{Type: adapters.EventStart, ID: answerID(ev.Raw)}), adapters.StreamGoesOn, nil
	case "contentBlockStart":
		if p.Start != nil && p.Start.ToolUse != nil {
			out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallStart, Index: i,
				ToolCall: &adapters.ToolCall{ID: p.Start.ToolUse.ToolUseID, Name: p.Start.ToolUse.Name}})
		}
	case "contentBlockDelta":
		d := p.Delta
		switch {
		case d == nil:
		case d.Text != nil && *d.Text != "":
			out = append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Index: i, Text: *d.Text})
		case d.ToolUse != nil && d.ToolUse.Input != "":
			out = append(out, &adapters.StreamEvent{Type: adapters.EventToolCallDelta, Index: i, ToolCall: &adapters.ToolCall{Arguments: d.ToolUse.Input}})
		case d.ReasoningContent != nil && d.ReasoningContent.Text != "":
			out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: i, Text: d.ReasoningContent.Text})
		case d.ReasoningContent != nil && d.ReasoningContent.Signature != "":
			out = append(out, &adapters.StreamEvent{Type: adapters.EventThinkingDelta, Index: i, Signature: adapters.TagSignature(Name, d.ReasoningContent.Signature)})
		}
	case "messageStop":
		return append(out, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: stopReason(p.StopReason)}), adapters.StreamMayEnd, nil
	case "metadata":
		if p.Usage != nil {
			u := usageFromWire(p.Usage)
			out = append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &u})
		}
		return out, adapters.StreamEnds, nil
	}
	return out, adapters.StreamGoesOn, nil
}

// Probe implements adapters.StreamStep. No client speaks Bedrock's
// dialect, so the host never passes its frames through; Probe still says
// what a frame holds, should one be relayed as it is.
func (s *streamStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	evs, end, err := s.Translate(nil, ev)
	for _, e := range evs {
		if e.Usage != nil {
			return e.Usage, end, err
		}
	}
	return nil, end, err
}

// DeltaText implements adapters.StreamStep.
func (s *streamStep) DeltaText(data []byte) string {
	var p streamPayload
	if json.Unmarshal(data, &p) != nil || p.Delta == nil {
		return ""
	}
	d := p.Delta
	switch {
	case d.Text != nil:
		return *d.Text
	case d.ToolUse != nil:
		return d.ToolUse.Input
	case d.ReasoningContent != nil:
		return d.ReasoningContent.Text
	}
	return ""
}
