package adapters

// Optional interfaces: a dialect or decoder implements them when it can.

// PartialText is implemented by stream decoders that pass frames through
// without parsing them: it returns the completion text seen so far, so a
// stream that ended without usage (a client that left, an upstream that
// broke) can still be counted.
type PartialText interface {
	PartialText() string
}

// Pending is implemented by stream decoders that can tell whether another
// event has already arrived, so the relay flushes once per burst of events
// that came together instead of once per event, without ever holding an
// event back.
type Pending interface {
	Pending() bool
}

// Releaser is implemented by stream decoders that hold pooled buffers: the
// relay calls Release once it is done with the stream and its events.
type Releaser interface {
	Release()
}
