package adapters

import (
	"errors"
	"io"
	"sync"
)

// StreamEnd says where an upstream event leaves the stream.
type StreamEnd int

// Where an event leaves a stream. Until a step says the stream may end, a
// body that ends is a cut-off (io.ErrUnexpectedEOF), never a clean end.
const (
	StreamGoesOn StreamEnd = iota // more events must follow
	// StreamMayEnd: the body may end after this event, though more may
	// come (Gemini's chunk with a finish reason, before its usage).
	StreamMayEnd
	// StreamEnds: this event is the upstream's last one; it is still
	// relayed (Anthropic's message_stop).
	StreamEnds
	// StreamEndMarker: this event only marks the end and is not relayed;
	// the client's dialect writes its own end (OpenAI's data: [DONE]).
	StreamEndMarker
)

// StreamStep is a vendor's part of reading one upstream SSE stream: what a
// single event means. NewStreamDecoder runs the loop around it: reading
// and pooling, queueing the events one upstream event becomes, the end of
// the body, and the text of a passthrough stream cut off before its usage.
// A step holds the state of one stream.
type StreamStep interface {
	// Translate appends to out the neutral events that one upstream event
	// means for a client of another dialect. An error event from the
	// upstream is returned as an *Error.
	Translate(out []*StreamEvent, ev *SSEEvent) ([]*StreamEvent, StreamEnd, error)
	// Probe reads an event that is relayed unchanged to a client of the
	// upstream's own dialect: the usage it reports (the totals so far) or
	// nil, and where it leaves the stream.
	Probe(ev *SSEEvent) (*Usage, StreamEnd, error)
	// DeltaText returns the generated text (answer, reasoning, tool
	// arguments) in the data of one relayed event. It is called only for a
	// passthrough stream that ended without reporting usage.
	DeltaText(data []byte) string
}

// StreamFlusher is implemented by steps that hold translated events back
// until the body ends cleanly (Gemini's usage, which may still grow after
// the finish reason); a step that never holds one back has nothing to
// flush.
type StreamFlusher interface {
	Flush(out []*StreamEvent) []*StreamEvent
}

// UsageSoFar is implemented by steps that know usage the upstream sent
// before the event that reports it (Anthropic's message_start): the relay
// bills a stream cut before its end at least that. A vendor that reports
// usage only at the end has none to tell.
type UsageSoFar interface {
	UsageSoFar() *Usage
}

// DecodeStream is how the host reads a chat provider's 2xx streamed answer
// to req: the family's step in the one loop, passed through unchanged when
// the client speaks the upstream's own dialect.
func DecodeStream(p ChatProvider, req *Request, body io.Reader) *StreamDecoder {
	wire := p.WireDialect()
	if f, ok := p.(FrameReader); ok {
		return &StreamDecoder{sse: f.NewEventReader(body), step: p.NewStreamStep(req), passthrough: req.Dialect == wire, dialect: wire}
	}
	return NewStreamDecoder(body, p.NewStreamStep(req), req.Dialect == wire, wire)
}

// FrameReader is implemented by a chat provider whose streams are not
// text/event-stream (Bedrock's binary event-stream framing): it turns the
// body into the events the one loop consumes, each with its type in Name
// and its JSON payload in Data, so the step and everything after it are
// the same as for SSE. An SSE vendor has nothing to supply.
type FrameReader interface {
	NewEventReader(body io.Reader) EventReader
}

// EventReader yields one stream's events (SSEReader is the SSE one). Next
// returns io.EOF at the end of the body; an event and its slices are valid
// until the next call. SetMaxEvent bounds one frame (ErrEventTooLarge past
// it, before it is buffered whole); Buffered reports whether bytes of a
// next event have arrived; Release gives the buffers back.
type EventReader interface {
	Next() (*SSEEvent, error)
	SetMaxEvent(n int)
	Buffered() bool
	// BytesRead is how many bytes of the body have been read, which bounds
	// the drain of a stream whose client left.
	BytesRead() int64
	Release()
}

// NewStreamDecoder reads a text/event-stream body with a vendor's step.
// With passthrough set (the client speaks dialect, the upstream's own),
// every event comes back as it arrived, carrying its frame in Raw, and as
// an EventUsage when it reports usage; otherwise Translate's events come
// back one by one.
func NewStreamDecoder(body io.Reader, step StreamStep, passthrough bool, dialect string) *StreamDecoder {
	return &StreamDecoder{sse: NewSSEReader(body), step: step, passthrough: passthrough, dialect: dialect}
}

// Watch has a passthrough decoder also translate each event it relays with
// step, a second step of the same vendor, and hand the neutral events to
// fn (valid during the call only): what a traced request's answer said
// (its finish reason, its text) without a second read of the body or any
// change to what is relayed. A translating decoder's events are neutral
// already: Watch does nothing there.
func (d *StreamDecoder) Watch(step StreamStep, fn func(*StreamEvent)) {
	if d.passthrough {
		d.watch, d.watchFn = step, fn
	}
}

// StreamDecoder is the one stream loop every SSE vendor shares: it yields
// upstream stream events. Next returns io.EOF after the upstream's normal
// end and any other error when the stream broke or the upstream sent an
// error event (then an *Error). Its events and their Raw frames are valid
// until the next call to Next; Release gives its buffers back.
type StreamDecoder struct {
	sse         EventReader
	step        StreamStep
	passthrough bool
	dialect     string
	mayEnd      bool
	done        bool
	pending     []*StreamEvent
	queue       []*StreamEvent // pending's backing array, reused
	ev          StreamEvent
	// seen keeps the data of relayed events since the last one that
	// reported usage, so a stream cut off before its final usage can still
	// be counted; it is parsed only then, and nearly every stream throws
	// it away.
	seen *seenData
	// watch translates relayed events for watchFn (see Watch)
	watch   StreamStep
	watchFn func(*StreamEvent)
	watched []*StreamEvent
}

// seenData is the data of relayed events, ends[i] closing event i.
type seenData struct {
	data []byte
	ends []int
}

// seenPool starts a buffer empty: a stream held open keeps only the few
// events it has relayed, and append sizes the buffer to them, where a
// fixed start was 4 KB for each of thousands of open streams.
var seenPool = sync.Pool{New: func() any { return new(seenData) }}

func (d *StreamDecoder) Next() (*StreamEvent, error) {
	for {
		if len(d.pending) > 0 {
			ev := d.pending[0]
			d.pending = d.pending[1:]
			return ev, nil
		}
		if d.done {
			return nil, io.EOF
		}
		sse, err := d.sse.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			if !d.mayEnd {
				return nil, io.ErrUnexpectedEOF // cut off before the upstream's end
			}
			d.done = true
			if f, ok := d.step.(StreamFlusher); ok && !d.passthrough {
				d.pending = f.Flush(d.queue[:0])
			}
			continue
		}
		if d.passthrough {
			usage, end, err := d.step.Probe(sse)
			if err != nil {
				return nil, err
			}
			if d.watch != nil {
				// a watcher's trouble with an event is not the stream's
				d.watched, _, _ = d.watch.Translate(d.watched[:0], sse)
				for _, ev := range d.watched {
					d.watchFn(ev)
				}
			}
			if d.ended(end) {
				continue
			}
			d.ev = StreamEvent{Type: EventPassthrough, Raw: sse.Raw, Dialect: d.dialect}
			if usage != nil {
				d.ev.Type, d.ev.Usage = EventUsage, usage
				d.releaseSeen()
			} else {
				// kept since the last usage too: a vendor that reports
				// usage before the end (Anthropic's message_start, Gemini's
				// every chunk) is billed that plus what came after it
				d.keep(sse.Data)
			}
			return &d.ev, nil
		}
		events, end, err := d.step.Translate(d.queue[:0], sse)
		if err != nil {
			return nil, err
		}
		d.queue = events
		d.pending = events
		d.ended(end)
	}
}

// ended records where an event left the stream and reports whether the
// event is only an end marker, not to be relayed.
func (d *StreamDecoder) ended(end StreamEnd) bool {
	switch end {
	case StreamMayEnd:
		d.mayEnd = true
	case StreamEnds:
		d.mayEnd, d.done = true, true
	case StreamEndMarker:
		d.mayEnd, d.done = true, true
		return true
	}
	return false
}

func (d *StreamDecoder) keep(data []byte) {
	if d.seen == nil {
		d.seen = seenPool.Get().(*seenData)
	}
	d.seen.data = append(d.seen.data, data...)
	d.seen.ends = append(d.seen.ends, len(d.seen.data))
}

func (d *StreamDecoder) releaseSeen() {
	if d.seen == nil {
		return
	}
	if cap(d.seen.data) <= 256<<10 {
		d.seen.data, d.seen.ends = d.seen.data[:0], d.seen.ends[:0]
		seenPool.Put(d.seen)
	}
	d.seen = nil
}

// UsageSoFar is the usage the step knows of before the upstream reported
// it (see the UsageSoFar interface), or nil.
func (d *StreamDecoder) UsageSoFar() *Usage {
	if s, ok := d.step.(UsageSoFar); ok {
		return s.UsageSoFar()
	}
	return nil
}

// PartialText is the completion text of a passthrough stream's events
// since the last usage it reported, parsed only now that it is needed, so
// a stream that ended without usage (a client that left, an upstream that
// broke) can still be counted.
func (d *StreamDecoder) PartialText() string {
	if d.seen == nil {
		return ""
	}
	defer d.releaseSeen()
	var text []byte
	start := 0
	for _, end := range d.seen.ends {
		text = append(text, d.step.DeltaText(d.seen.data[start:end])...)
		start = end
	}
	return string(text)
}

// BytesRead is how many bytes of the upstream's body the decoder has read.
func (d *StreamDecoder) BytesRead() int64 { return d.sse.BytesRead() }

// SetMaxEvent bounds one upstream event's size: past n bytes Next returns
// ErrEventTooLarge rather than buffering on (a channel's max_stream_event).
func (d *StreamDecoder) SetMaxEvent(n int) { d.sse.SetMaxEvent(n) }

// Pending reports whether another event has already arrived, or the
// stream's end is known (the next call returns io.EOF at once), so the
// relay flushes once per burst of events that came together instead of
// once per event, without ever holding an event back; and writes the
// upstream's last event (Anthropic's message_stop, relayed as it came)
// with the stream's end, after the request is settled.
func (d *StreamDecoder) Pending() bool { return len(d.pending) > 0 || d.done || d.sse.Buffered() }

// Release gives the pooled buffers back once the relay is done with the
// stream and its events.
func (d *StreamDecoder) Release() {
	d.sse.Release()
	d.releaseSeen()
}
