//lint:file-ignore SA1019 x/net's HTTP/2 transport is the only Go client that sends extended CONNECT: net/http's Transport refuses the :protocol pseudo-header

package gatewaytest

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"

	"golang.org/x/net/http2"
)

// ExtendedConnectClient is an HTTP client for coder/websocket's Dial that
// opens the socket over HTTP/2 cleartext (h2c, prior knowledge) with an
// extended CONNECT (RFC 8441) instead of an HTTP/1.1 upgrade: the
// library's GET is sent as CONNECT with :protocol websocket, and the
// server's 200 is handed back as the 101 the library expects, the stream
// as the socket. The HTTP/2 transport sends extended CONNECT only when
// the server offers it (SETTINGS_ENABLE_CONNECT_PROTOCOL) and fails
// otherwise. (net/http's own Transport refuses the :protocol header.)
func ExtendedConnectClient() *http.Client {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: &extendedConnect{h2: tr}}
}

type extendedConnect struct{ h2 *http2.Transport }

// ProtoSeen is set on answers that came over HTTP/2, for tests to check.
const protoHeader = "X-Test-Proto"

func (e *extendedConnect) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Sec-WebSocket-Key")
	if key == "" {
		return nil, errors.New("not a WebSocket handshake")
	}
	pr, pw := io.Pipe()
	// the stream outlives the dial's context, which only bounds the
	// handshake; closing the socket ends it
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	stop := context.AfterFunc(req.Context(), cancel)
	c := req.Clone(ctx)
	c.Method = http.MethodConnect
	c.Body = pr
	c.ContentLength = -1
	for _, h := range []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Extensions"} {
		c.Header.Del(h)
	}
	c.Header.Set(":protocol", "websocket")
	if c.URL.Scheme == "ws" {
		c.URL.Scheme = "http"
	}
	resp, err := e.h2.RoundTrip(c)
	if !stop() || err != nil || resp.StatusCode != http.StatusOK {
		pw.Close()
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			return nil, req.Context().Err()
		}
		return resp, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	resp.Header.Set("Connection", "Upgrade")
	resp.Header.Set("Upgrade", "websocket")
	resp.Header.Set("Sec-WebSocket-Accept", base64.StdEncoding.EncodeToString(sum[:]))
	resp.Header.Set(protoHeader, resp.Proto)
	resp.StatusCode, resp.Status = http.StatusSwitchingProtocols, "101 Switching Protocols"
	resp.Body = &h2Socket{r: resp.Body, w: pw, cancel: cancel}
	return resp, nil
}

// h2Socket is an HTTP/2 stream as the read-write body of a 101.
type h2Socket struct {
	r      io.ReadCloser
	w      *io.PipeWriter
	cancel context.CancelFunc
}

func (s *h2Socket) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *h2Socket) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s *h2Socket) Close() error {
	s.w.Close()
	err := s.r.Close()
	s.cancel()
	return err
}

// ProtoOf says which HTTP version carried a handshake answered through
// ExtendedConnectClient ("HTTP/2.0"), or "" for another client.
func ProtoOf(resp *http.Response) string { return resp.Header.Get(protoHeader) }
