package adapters

import "net/http"

// Realtime sessions (OpRealtime) are WebSocket connections the gateway
// relays frame by frame; it reads only the server events that end a
// response, for their usage. A family whose upstream serves them
// implements RealtimeProvider; a dialect whose clients open them,
// RealtimeDialect.

// RealtimeProvider is implemented by providers whose upstream serves
// realtime sessions over a WebSocket.
type RealtimeProvider interface {
	// RealtimeDial returns the upstream socket's URL for up's model and
	// the headers to open it with, the channel's key among them. client
	// is the client's upgrade request, for the headers a same-dialect
	// upstream needs (an API version it asked for); its credentials are
	// never copied.
	RealtimeDial(up *Upstream, client *http.Request) (url string, header http.Header, err error)
	// RealtimeEvent reads one server event: RealtimeResponseStarted for
	// the event that opens a response, RealtimeResponseDone with what the
	// response used for the one that ends it. It is called on every text
	// frame, so it must pass over others cheaply.
	RealtimeEvent(event []byte) (RealtimeEventKind, Usage)
	// RealtimeCancel is the client event that cancels the response under
	// way: sent when the client leaves mid-response, so that the upstream
	// ends it and reports what it used.
	RealtimeCancel() []byte
}

// RealtimeEventKind is what a Realtime server event means for billing.
type RealtimeEventKind int

// Realtime event kinds.
const (
	RealtimeOther RealtimeEventKind = iota
	RealtimeResponseStarted
	RealtimeResponseDone
)

// RealtimeDialect is implemented by dialects whose clients open realtime
// sessions.
type RealtimeDialect interface {
	// RealtimeSubprotocols are the WebSocket subprotocols the gateway may
	// accept for the client, in preference order; never one that carries
	// a key.
	RealtimeSubprotocols() []string
	// RealtimeError is an error event in the dialect's realtime shape,
	// sent before the gateway ends a session.
	RealtimeError(e *Error) []byte
}
