package engine

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Upstream is what the engine needs of a channel beyond routing: its
// vendor's adapter, the HTTP client of its timeouts, its bounds and the
// price-changing passthrough it allows.
type Upstream struct {
	// Provider is the channel's family; a request asks it for the
	// capability it needs (see plan.go)
	Provider  adapters.Provider
	Client    *http.Client
	Bounds    Bounds
	Allowance Allowance
}

// Bounds are a channel's limits in force, defaults filled in.
type Bounds struct {
	Dial, ResponseHeader, StreamIdle, Timeout time.Duration
	MaxResponseBody                           int64
	MaxStreamEvent                            int
}

// AsError turns any error into a neutral one.
func AsError(err error) *adapters.Error {
	var e *adapters.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return adapters.ClientClosed()
	}
	return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%v", err)
}

// UpstreamRequestID is the upstream's own id for a request, from the
// header its vendor names (X-Request-Id by default), at most 256 bytes.
func UpstreamRequestID(prov adapters.Provider, h http.Header) string {
	var v string
	if r, ok := prov.(adapters.RequestIDReader); ok {
		v = r.UpstreamRequestID(h)
	} else {
		v = h.Get("X-Request-Id")
	}
	if len(v) > 256 {
		v = v[:256]
	}
	return v
}
