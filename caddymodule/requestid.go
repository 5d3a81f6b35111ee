package caddymodule

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// requestIDHeader carries a request's id in, and always out.
const requestIDHeader = "X-Request-Id"

// requestIDVar is the request variable holding the id, so it is also the
// placeholder {http.vars.gateway.request_id}.
const requestIDVar = "gateway.request_id"

// assignRequestID gives the request its id: the caller's X-Request-Id when
// it is well formed, else a new one. The id goes back in the response
// header, into the access log (setAccessLogFields) and, through the
// request variable, onto the usage row.
func assignRequestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if !wellFormedRequestID(id) {
		id = newRequestID()
		r.Header.Set(requestIDHeader, id)
	}
	w.Header().Set(requestIDHeader, id)
	caddyhttp.SetVar(r.Context(), requestIDVar, id)
	return id
}

// requestIDOf is the id assignRequestID gave the request.
func requestIDOf(r *http.Request) string {
	id, _ := caddyhttp.GetVar(r.Context(), requestIDVar).(string)
	return id
}

// wellFormedRequestID accepts 1 to 128 characters that are safe in a
// header, a log line and a CSV cell: letters, digits and - _ . : + = / @.
func wellFormedRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '+', c == '=', c == '/', c == '@':
		default:
			return false
		}
	}
	return true
}

// newRequestID is 128 bits in hex: the time in milliseconds (48 bits,
// most significant first) and 80 random bits, as a UUIDv7 orders them.
// Ids need to be unique, not secret, so the fast per-thread generator
// serves; the time first makes ids made one after another sort together,
// so the usage table's request-id index takes each batch's rows at its
// end instead of in one random page a row (with random ids it made the
// usage writer's commits several times dearer).
func newRequestID() string {
	var b [16]byte
	ms, hi, lo := uint64(time.Now().UnixMilli()), rand.Uint64(), rand.Uint32()
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	for i := range 6 {
		b[6+i] = byte(hi >> (8 * i))
	}
	for i := range 4 {
		b[12+i] = byte(lo >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}
