// Package wsupgrade accepts a client's WebSocket however it was opened:
// HTTP/1.1's Upgrade (RFC 6455) or HTTP/2's extended CONNECT (RFC 8441),
// so the server layer hands the Realtime engine one *websocket.Conn either
// way.
package wsupgrade

import (
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// IsExtendedConnect reports whether r opens a WebSocket on an HTTP/2 (or
// later) stream.
func IsExtendedConnect(r *http.Request) bool {
	return r.ProtoMajor >= 2 && r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
}

// IsRequest reports whether r asks for a WebSocket at all: a GET with
// 'Upgrade: websocket', or an extended CONNECT.
func IsRequest(r *http.Request) bool {
	return IsExtendedConnect(r) || r.Method == http.MethodGet && headerHasToken(r.Header, "Upgrade", "websocket")
}

// Accept completes the handshake of a WebSocket request (IsRequest) and
// returns the client's socket.
func Accept(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*websocket.Conn, error) {
	if IsExtendedConnect(r) {
		return acceptExtendedConnect(w, r, opts)
	}
	return websocket.Accept(w, r, opts)
}

// headerHasToken reports whether a comma-separated header holds token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
