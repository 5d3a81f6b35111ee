package adapters

import (
	"encoding/json"
	"net/http"
	"time"
)

// Realtime sessions (OpRealtime) are WebSocket connections the gateway
// relays frame by frame. It reads the client's events before relaying them,
// to reserve for what they will cost and to keep them within what was
// reserved, and the server events that end a response, for their usage. A
// family whose upstream serves them implements RealtimeProvider; a dialect
// whose clients open them, RealtimeDialect.

// RealtimeProvider is the realtime capability: a family whose upstream
// serves realtime sessions over a WebSocket.
type RealtimeProvider interface {
	// RealtimeDial returns the upstream socket's URL for up's model and
	// the headers to open it with, the channel's key among them. client
	// is the client's upgrade request, for the headers a same-dialect
	// upstream needs (an API version it asked for); its credentials are
	// never copied.
	RealtimeDial(up *Upstream, client *http.Request) (url string, header http.Header, err error)
	// RealtimeSession returns the reader of one session's events, opened
	// by client, that keeps the session within limits.
	RealtimeSession(client *http.Request, limits RealtimeLimits) RealtimeSession
}

// RealtimeLimits are what the gateway reserved for: every cost a session
// can cause must be bounded by them.
type RealtimeLimits struct {
	// MaxOutputTokens is the most tokens one response may write, whoever
	// asked for it (the client, or the upstream's turn detection).
	MaxOutputTokens int64
	// Transcription reports whether input audio may be transcribed: the
	// model has a price per second of audio. Without one, a client event
	// that turns transcription on is refused.
	Transcription bool
}

// RealtimeSession reads one session's events, in order in each direction.
// ClientEvent is called from one goroutine, ServerEvent from another.
type RealtimeSession interface {
	// Setup is the client event the gateway sends upstream before any of
	// the client's, bringing the session's defaults within the limits
	// (the output cap of responses the upstream starts by itself); nil
	// when none is needed. The upstream's answer to it is read by
	// ServerEvent as RealtimeSetupDone or RealtimeSetupFailed and is not
	// relayed.
	Setup() []byte
	// ClientEvent reads a client event before it is relayed and returns
	// what to relay in its place (the event, or the event with its output
	// cap lowered to the limit) and what it means for billing. An error
	// refuses the event: it is not relayed, and the client gets the error.
	ClientEvent(event []byte) ([]byte, RealtimeClientEvent, *Error)
	// ServerEvent reads one server event. It is called on every text
	// frame, so it must pass over audio cheaply.
	ServerEvent(event []byte) RealtimeServerEvent
	// Cancel is the client event that cancels the response id: sent when
	// the client leaves mid-response, so that the upstream ends it and
	// reports what it used.
	Cancel(responseID string) []byte
	// Configure is the client event that applies a session configuration
	// (a client secret's, a JSON object) to the session; the caller reads
	// it as ClientEvent reads a client's, before relaying it.
	Configure(session json.RawMessage) []byte
	// Settled is closed once the session's state (what it transcribes,
	// its input audio format) is the upstream's: its session is created
	// and every session.update relayed is answered, accepted or refused.
	// A client event whose cost depends on that state waits for it
	// (RealtimeClientEvent.AwaitState).
	Settled() <-chan struct{}
}

// RealtimeClientEvent is what a client event means for billing.
type RealtimeClientEvent struct {
	// CreatesResponse: the event asks for a response.
	CreatesResponse bool
	// TranscribedMillis is the input audio the event carries that the
	// upstream will transcribe, in milliseconds.
	TranscribedMillis int64
	// Adds is the most the event adds to what the next response reads of
	// the conversation: items, input audio, the session's instructions and
	// tools.
	Adds RealtimeInput
	// Reads, for a response.create, is the most the response reads besides
	// the conversation: its own instructions and tools, and its input
	// items when it names them (OwnInput: then it reads those instead of
	// the conversation). References counts the items of the session its
	// input names by id, whose size the caller knows.
	Reads      RealtimeInput
	OwnInput   bool
	References int
	// AwaitState: what the event costs depends on the session's state as
	// the upstream accepted it, which awaits the answer to a
	// session.update. Nothing else is set: the caller waits for Settled,
	// then reads the event again. A client's own session.update never
	// changes what is billed until the upstream accepts it.
	AwaitState bool
}

// RealtimeInput bounds the tokens content is read as, text and audio
// apart: never fewer than the upstream counts.
type RealtimeInput struct {
	Text, Audio int64
}

// RealtimeServerEvent is what a server event means for billing.
type RealtimeServerEvent struct {
	Kind RealtimeEventKind
	// InConversation: a RealtimeResponseStarted response reads the
	// session's default conversation (rather than input of its own), so
	// its usage covers what was added to it before it started.
	InConversation bool
	// ResponseID names the response a RealtimeResponseStarted or
	// RealtimeResponseDone event is about.
	ResponseID string
	// Usage is what a RealtimeResponseDone's response used.
	Usage Usage
	// Message is why a RealtimeSetupFailed failed.
	Message string
}

// RealtimeEventKind is what a Realtime server event means for billing.
type RealtimeEventKind int

// Realtime event kinds.
const (
	RealtimeOther RealtimeEventKind = iota
	RealtimeResponseStarted
	RealtimeResponseDone
	// RealtimeSetupDone and RealtimeSetupFailed answer Setup.
	RealtimeSetupDone
	RealtimeSetupFailed
)

// RealtimeDialect is implemented by dialects whose clients open realtime
// sessions.
type RealtimeDialect interface {
	// RealtimeSubprotocols are the WebSocket subprotocols the gateway may
	// accept for the client, in preference order; never one that carries
	// a key.
	RealtimeSubprotocols() []string
	// RealtimeError is an error event in the dialect's realtime shape,
	// sent before the gateway ends a session or in place of an event it
	// refused.
	RealtimeError(e *Error) []byte
}

// ClientSecretDialect is implemented by dialects whose browsers open
// realtime sessions with a short-lived client secret the gateway mints
// (OpRealtimeClientSecret), so that a page never holds a key.
type ClientSecretDialect interface {
	// DecodeClientSecret reads a request for a secret; a refusal is a 400
	// in the dialect.
	DecodeClientSecret(body []byte) (*ClientSecretRequest, *Error)
	// ClientSecret is the answer carrying a minted secret.
	ClientSecret(value string, expiresAt time.Time, req *ClientSecretRequest) []byte
}

// ClientSecretRequest is a client's request for a client secret.
type ClientSecretRequest struct {
	// TTL is the lifetime asked for; 0 for the gateway's default.
	TTL time.Duration
	// Model is the session's model, when the request names one: the
	// secret opens that model only.
	Model string
	// Session is the session configuration the client sent (a JSON
	// object), answered back.
	Session json.RawMessage
}
