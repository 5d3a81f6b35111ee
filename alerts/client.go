package alerts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// errPrivate marks a webhook address the address policy refused.
var errPrivate = errors.New("webhook address not allowed")

// newClient is the webhook's client: it connects only where the gateway's
// address policy (adapters.CheckPublicAddr, as image fetches) allows,
// checked on the address actually dialled (after resolution, so no DNS
// answer gets past it), unless allowPrivate; it follows no redirect (a
// redirect is a failed attempt) and gives up after timeout.
func newClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: min(timeout, 10*time.Second)}
	if !allowPrivate {
		dialer.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("%w: %v", errPrivate, err)
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("%w: %q is not an IP address", errPrivate, host)
			}
			if err := adapters.CheckPublicAddr(ip); err != nil {
				return fmt.Errorf("%w: %w (allow_private_addresses lets it)", errPrivate, err)
			}
			return nil
		}
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			Proxy:                 nil, // a proxy would dial for us, past the policy
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
