// Package h2xconnect turns on HTTP/2 extended CONNECT (RFC 8441) in Go's
// HTTP/2 server, so WebSocket clients of /v1/realtime may use HTTP/2 as
// well as HTTP/1.1's upgrade.
//
// net/http offers extended CONNECT only when GODEBUG has http2xconnect=1,
// and reads GODEBUG once, in its init. Go initializes packages in
// dependency order, choosing among the ready ones by import path; this
// package imports neither net/http nor anything that does, and its path
// sorts before "net/http", so its init runs first and can add the setting.
// GODEBUG already naming http2xconnect (=0 to turn it off) is left alone.
package h2xconnect

import (
	"os"
	"strings"
)

func init() {
	e := os.Getenv("GODEBUG")
	if strings.Contains(e, "http2xconnect=") {
		return
	}
	if e != "" {
		e += ","
	}
	_ = os.Setenv("GODEBUG", e+"http2xconnect=1")
}
