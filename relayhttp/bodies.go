package relayhttp

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
)

// Request bodies in flight are bounded in all (max_inflight_body in
// memory, max_inflight_uploads on disk) and shared out: one key, or one
// client address, may hold at most its share of each, so a caller who
// opens many connections and stalls their bodies cannot take the room
// every other caller needs. Bytes are held as they arrive (bodies.Budget),
// and a request its key could not make whatever its body says is refused
// before the body is read (engine.Precheck).

// bodyShare is the default share of a body budget one key or one address
// may hold: a quarter, so a caller needs four keys on four addresses to
// take it all.
const bodyShare = 4

// bodyLinger is how long a refused request's connection stays open,
// after the answer, for what the client is still sending (bodies.Linger).
const bodyLinger = 2 * time.Second

// BodyLimits are a budget's bounds from its options: the total, and
// each share, defaulting to a quarter of the total; none less than one
// body of at most limit bytes needs (its buffer holds a byte more).
func BodyLimits(total, perKey, perAddress, limit int64) bodies.Limits {
	total = max(total, limit+1)
	if perKey <= 0 {
		perKey = total / bodyShare
	}
	if perAddress <= 0 {
		perAddress = total / bodyShare
	}
	return bodies.Limits{Total: total, PerKey: max(perKey, limit+1), PerAddress: max(perAddress, limit+1)}
}

// BodyOwner is whom a request's body is counted against: its key, and
// its client's network (address is the client's IP; an IPv6 client is
// counted by its /64, as it is commonly given a whole one).
func BodyOwner(address string, id *keys.Identity) bodies.Owner {
	if strings.IndexByte(address, ':') >= 0 {
		address = account.ClientNetwork(address)
	}
	return bodies.Owner{Key: id.Token.ID, Address: address}
}

// BodyBusy words a refusal of the body budget b (bodies.Busy), in bytes
// of memory (max_inflight_body) or, for uploads, of disk
// (max_inflight_uploads): the caller's share taken is a 429, like
// max_parallel, since it is the caller's own requests it waits for; the
// whole budget taken is a 503, the gateway's state. Either is worth
// retrying after a second.
func BodyBusy(err error, h http.Header, b *bodies.Budget, uploads bool) *adapters.Error {
	h.Set("Retry-After", "1")
	option, limits := "max_inflight_body", b.Limits()
	if uploads {
		option = "max_inflight_uploads"
	}
	switch {
	case errors.Is(err, bodies.ErrKeyBusy):
		return &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "too_many_bodies_in_flight",
			Message: fmt.Sprintf("this API key's requests in flight already hold %d bytes of request bodies, its share (%s_per_key): wait for them to end, then retry", limits.PerKey, option)}
	case errors.Is(err, bodies.ErrAddressBusy):
		return &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "too_many_bodies_in_flight",
			Message: fmt.Sprintf("requests in flight from your address already hold %d bytes of request bodies, its share (%s_per_address): wait for them to end, then retry", limits.PerAddress, option)}
	case uploads:
		return errUploadsFull
	}
	return adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded,
		"the gateway is reading too many large requests at once: retry shortly")
}

// BodyReadError words a failure to read a request body: one that
// arrived slower than the server's minimum rate (Caddy's timeouts
// read_body_idle) is a 408; one whose client went is not answered.
func BodyReadError(r *http.Request, err error) *adapters.Error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &adapters.Error{Status: http.StatusRequestTimeout, Type: adapters.ErrInvalidRequest, Code: "request_timeout",
			Message: "the request body arrived too slowly: the server cuts a body that stalls or falls behind its minimum rate (timeouts read_body_idle); send it again on a better connection"}
	case r.Context().Err() != nil:
		return adapters.ClientClosed()
	}
	return adapters.BadRequest("the request body could not be read")
}

// RefuseUnread answers a request whose body is left unread (refused
// before it was read, or while it was): at once, even to a client that
// has stalled, and then reads for a moment, up to maxBody bytes, what the
// client still sends, so a client still sending gets the answer rather
// than a reset connection (bodies.Refusing, bodies.Linger).
func RefuseUnread(w http.ResponseWriter, r *http.Request, maxBody int64, answer func() error) error {
	if !bodies.Unread(r) {
		return answer()
	}
	bodies.Refusing(w, r)
	err := answer()
	bodies.Linger(w, r, maxBody, bodyLinger)
	return err
}

// refuseUnread is RefuseUnread for the largest body this handler reads.
func (h *Handler) refuseUnread(w http.ResponseWriter, r *http.Request, answer func() error) error {
	return RefuseUnread(w, r, max(h.MaxRequestBody, h.MaxUploadSize), answer)
}
