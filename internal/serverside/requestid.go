package serverside

import (
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// WellFormedRequestID accepts 1 to 128 characters that are safe in a
// header, a log line and a CSV cell: letters, digits and - _ . : + = / @.
func WellFormedRequestID(id string) bool {
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

// NewRequestID is 128 bits in hex: the time in milliseconds (48 bits,
// most significant first) and 80 random bits, as a UUIDv7 orders them.
// Ids need to be unique, not secret, so the fast per-thread generator
// serves; the time first makes ids made one after another sort together,
// so the usage table's request-id index takes each batch's rows at its
// end instead of in one random page a row (with random ids it made the
// usage writer's commits several times dearer).
func NewRequestID() string {
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
