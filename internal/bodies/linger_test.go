package bodies

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A refusal sent before the body is read reaches a sender that stalls at
// once, and a sender still sending gets it whole, not a reset connection.
func TestRefusingThenLinger(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// wrapped, as Caddy's server wraps it: net/http then no longer
		// knows how much of the body is left, and would read up to
		// 256 KiB of it before answering
		r.Body = struct{ io.ReadCloser }{r.Body}
		Refusing(w, r)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "no room")
		Linger(w, r, 8<<20, 2*time.Second)
	}))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n%s", strings.Repeat("s", 10_000))
	conn.SetReadDeadline(time.Now().Add(time.Second)) // well before Linger ends
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stalled sender got no answer: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 503 || string(b) != "no room" || !resp.Close {
		t.Fatalf("stalled sender's answer: %d %q close=%v", resp.StatusCode, b, resp.Close)
	}

	body := bytes.Repeat([]byte("u"), 4<<20)
	for i := range 20 {
		resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || string(b) != "no room" {
			t.Fatalf("upload %d: %d %q", i, resp.StatusCode, b)
		}
	}
}
