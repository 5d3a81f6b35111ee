package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery. The signature is Stripe's scheme: HMAC-SHA256
// with the configured secret over "<timestamp>.<body>", hex, as
// "t=<timestamp>,v1=<signature>"; the timestamp (unix seconds) is signed
// so that a captured delivery cannot be replayed later than the receiver's
// tolerance.
const (
	HeaderSignature = "Gateway-Signature"
	HeaderTimestamp = "Gateway-Timestamp"
	HeaderEventID   = "Gateway-Event-Id"
)

// Sign is the signature of body sent at ts with secret: hex of
// HMAC-SHA256(secret, "<ts>.<body>").
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SignatureHeader is the Gateway-Signature value of body sent at ts.
func SignatureHeader(secret string, ts int64, body []byte) string {
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + Sign(secret, ts, body)
}

// Verification failures.
var (
	ErrNoSignature = errors.New("no v1 signature or timestamp in the header")
	ErrSignature   = errors.New("the signature does not match the body")
	ErrTooOld      = errors.New("the timestamp is outside the tolerance")
)

// Verify checks a delivery as a receiver does: header is Gateway-Signature,
// body the raw request body; a timestamp further than tolerance from now
// is refused (a replay). Any of several v1 signatures may match.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts int64
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return ErrNoSignature
			}
			ts = n
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == 0 || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || -d > tolerance {
		return ErrTooOld
	}
	want := []byte(Sign(secret, ts, body))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrSignature
}
