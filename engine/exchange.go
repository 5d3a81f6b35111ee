package engine

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// Exchange is one request's life, from decode to settlement: what was
// asked, what admission holds for it, and what the answer was, for its
// usage row and metrics.
type Exchange struct {
	// Settled says the handler settles x (Settle, deferred): a whole
	// answer is then settled before its body is sent. A batch line, a
	// probe and a realtime session settle their own way and leave it unset.
	Settled bool
	settled bool // Settle has run: it runs once
	W       http.ResponseWriter
	R       *http.Request
	Dialect adapters.Dialect
	ID      *keys.Identity
	Req     *adapters.Request
	Price   *billing.Price
	Hold    billing.Hold
	Ticket  billing.Ticket // rate limits held
	Slot    bool           // a usage queue slot is taken for the row
	Start   time.Time
	TTFB    time.Duration
	Channel string
	Usage   adapters.Usage
	Status  int
	ErrMsg  string
	// RequestID is the gateway's id for the request, UpstreamID the
	// upstream's own for its last attempt
	RequestID, UpstreamID string
	// Text is the completion text seen, for counting when the upstream
	// reports no usage.
	Text strings.Builder
	// Tail is the text relayed after the last usage the upstream reported
	// (passthrough streams), and Cut is true for a stream that ended
	// before its end event: see BilledUsage.
	Tail string
	Cut  bool
	// Media is set for image, speech and transcription requests
	Media *Media
	// Trace is the request's traced span (nil: untraced), looked up once
	// (traced) by the engine
	Trace  *tracing.Request
	traced bool
	// Pin is the conversation's binding, for chat and responses requests
	// when affinity is on
	Pin *Pin
	// cache is the response cache's part in the request; nil: none
	cache *cached
}

// Media is what an exchange keeps of a media request.
type Media struct {
	Usage adapters.MediaUsage
	// Reserved is the transcription's reservation, what is charged when
	// the upstream does not say how long the audio was
	Reserved int64
}

// Fail answers with an error before anything was relayed.
func (x *Exchange) Fail(e *adapters.Error) error {
	x.Status, x.ErrMsg = e.Status, e.Message
	if e.Status == adapters.StatusClientClosed {
		return nil // nobody is listening
	}
	return WriteError(x.W, x.Dialect, e)
}

// Observe keeps what billing needs from an event: the last usage the
// upstream reported, and the text in case it reports none.
func (x *Exchange) Observe(ev *adapters.StreamEvent) {
	if x.Trace != nil {
		x.Trace.Observe(ev)
	}
	switch ev.Type {
	case adapters.EventUsage:
		if ev.Usage != nil {
			x.Usage = *ev.Usage
		}
	case adapters.EventTextDelta, adapters.EventThinkingDelta:
		x.Text.WriteString(ev.Text)
	case adapters.EventToolCallStart, adapters.EventToolCallDelta:
		if ev.ToolCall != nil {
			x.Text.WriteString(ev.ToolCall.Name)
			x.Text.WriteString(ev.ToolCall.Arguments)
		}
	}
}

// WriteError answers in the dialect's error shape. A 429 for quota carries
// x-should-retry: false, since the official SDKs otherwise retry a 429.
func WriteError(w http.ResponseWriter, d adapters.Dialect, e *adapters.Error) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.Type == adapters.ErrInsufficientQuota || e.Status < 500 && e.Status != http.StatusTooManyRequests && e.Status != http.StatusRequestTimeout && e.Status != http.StatusConflict {
		h.Set("X-Should-Retry", "false")
	}
	body := d.EncodeError(e)
	// The length lets a client read the whole error at once. Without it
	// the answer is chunked and ends only when the handler returns, which
	// for a refusal before the body is read comes after the lingering
	// close (bodies.Linger): seconds for a client that stopped sending.
	// A refusal that has a usage row is settled before it is written
	// (Engine.Refuse), since the client then has the whole answer as soon
	// as it is flushed.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	// a client that cannot be written to has gone: nothing to tell Caddy,
	// which would log the request with its headers
	_, _ = w.Write(body)
	return nil
}
