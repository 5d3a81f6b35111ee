package wsupgrade

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// HTTP/2 carries a WebSocket on one stream opened by an extended CONNECT
// (RFC 8441): no Upgrade headers, no key, a 200 instead of a 101, and the
// stream's two halves (the request body, the response) as the socket's.
// The frames on it are RFC 6455's, so coder/websocket, which accepts only
// HTTP/1.1 upgrades, serves it once the request looks like one and the
// stream is handed over as a hijacked connection. Go's HTTP/2 server
// offers extended CONNECT when GODEBUG has http2xconnect=1 (which
// internal/h2xconnect sets).

// acceptExtendedConnect accepts a WebSocket opened by an HTTP/2 extended
// CONNECT.
func acceptExtendedConnect(w http.ResponseWriter, r *http.Request, opts *websocket.AcceptOptions) (*websocket.Conn, error) {
	up := r.Clone(r.Context())
	up.Method = http.MethodGet
	up.Header.Del(":protocol")
	up.Header.Set("Connection", "Upgrade")
	up.Header.Set("Upgrade", "websocket")
	// RFC 8441 has no key to prove the upgrade; one is made up for the
	// library's checks, and its answer is not sent
	var key [16]byte
	_, _ = rand.Read(key[:])
	up.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(key[:]))
	if up.Header.Get("Sec-WebSocket-Version") == "" {
		up.Header.Set("Sec-WebSocket-Version", "13")
	}
	return websocket.Accept(&h2Stream{w: w, body: r.Body, rc: http.NewResponseController(w)}, up, opts)
}

// h2Stream is an HTTP/2 stream posing as a hijackable HTTP/1.1 response.
type h2Stream struct {
	w    http.ResponseWriter
	body io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (s *h2Stream) Header() http.Header { return s.w.Header() }

func (s *h2Stream) Write(b []byte) (int, error) { return s.w.Write(b) }

// WriteHeader answers the upgrade's 101 with HTTP/2's 200.
func (s *h2Stream) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		h := s.w.Header()
		h.Del("Upgrade")
		h.Del("Connection")
		h.Del("Sec-Websocket-Accept")
		code = http.StatusOK
	}
	s.w.WriteHeader(code)
	_ = s.rc.Flush()
}

// Hijack hands the stream over as a connection.
func (s *h2Stream) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := &h2Conn{s: s}
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// h2Conn is the stream as a net.Conn: reads from the request body, writes
// flushed to the response one by one.
type h2Conn struct {
	s  *h2Stream
	mu sync.Mutex
}

func (c *h2Conn) Read(b []byte) (int, error) { return c.s.body.Read(b) }

func (c *h2Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.s.w.Write(b)
	if err == nil {
		err = c.s.rc.Flush()
	}
	return n, err
}

// Close ends the request body; the stream itself ends when the handler
// returns.
func (c *h2Conn) Close() error {
	c.s.once.Do(func() { _ = c.s.body.Close() })
	return nil
}

func (c *h2Conn) LocalAddr() net.Addr                { return h2Addr{} }
func (c *h2Conn) RemoteAddr() net.Addr               { return h2Addr{} }
func (c *h2Conn) SetDeadline(t time.Time) error      { return nil }
func (c *h2Conn) SetReadDeadline(t time.Time) error  { return nil }
func (c *h2Conn) SetWriteDeadline(t time.Time) error { return nil }

type h2Addr struct{}

func (h2Addr) Network() string { return "h2" }
func (h2Addr) String() string  { return "h2-stream" }

// Interface guards.
var (
	_ http.Hijacker = (*h2Stream)(nil)
	_ net.Conn      = (*h2Conn)(nil)
)
