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
	// RealtimeUsage reads one server event: done is true for the event
	// that ends a response, with what the response used. It is called on
	// every text frame, so it must reject others cheaply.
	RealtimeUsage(event []byte) (u Usage, done bool)
}

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
