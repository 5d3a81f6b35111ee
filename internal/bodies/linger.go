package bodies

import (
	"io"
	"net/http"
	"time"
)

// A refusal of a request whose body is left unread (an upload refused
// for lack of space) has two bad endings in net/http: by default the
// answer waits until the server has read up to 256 KiB more of the body,
// which a slow or stalled sender may never send; and closing the
// connection at once with bytes still arriving resets it, so a client
// still sending loses the answer already written. Refusing answers at
// once and then reads what the client goes on sending, for a bounded
// time and size, before the connection closes (what nginx calls a
// lingering close).
//
// HTTP/2 and later need neither: a stream's answer is sent whatever its
// body does, and the connection carries other streams, so it is not
// closed.

// Refusing readies w for an answer sent before r's body is read (or
// while it is read): full duplex, so the answer is not held for the body,
// and, over HTTP/1, the connection closed after it. Call it before
// writing the answer, and Linger after.
func Refusing(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 {
		return
	}
	_ = http.NewResponseController(w).EnableFullDuplex()
	w.Header().Set("Connection", "close")
}

// Linger sends what w holds and then, over HTTP/1, reads and discards
// r's body until it ends, limit bytes are read or d has passed,
// whichever comes first.
func Linger(w http.ResponseWriter, r *http.Request, limit int64, d time.Duration) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if r.ProtoMajor != 1 {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(d))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, limit))
}

// Unread reports whether r may have a body left to read: one with a
// Content-Length, or one without (chunked) that is not known to be empty.
func Unread(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}
