package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits of FetchImage. Variables so a deployment or a test can change them.
var (
	MaxImageBytes     int64 = 20 << 20
	ImageFetchTimeout       = 15 * time.Second
	maxImageRedirects       = 5
)

// allowLoopbackFetch lets tests fetch from an httptest server on 127.0.0.1;
// nothing else may set it.
var allowLoopbackFetch = false

// blockedPrefixes are ranges a fetch must never reach beyond what netip's
// predicates already cover: "this network", CGNAT, IETF protocol
// assignments, benchmarking, reserved and broadcast.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// nat64 is the well-known NAT64 prefix, whose last four bytes are an IPv4
// address that must pass the same checks.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// errBlockedAddress marks a refused dial.
var errBlockedAddress = errors.New("address not allowed")

// checkFetchAddr refuses loopback, private, link-local, unspecified,
// multicast and other non-public addresses.
func checkFetchAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !ip.IsValid():
		return fmt.Errorf("%w: invalid address", errBlockedAddress)
	case ip.IsLoopback():
		if allowLoopbackFetch {
			return nil
		}
		return fmt.Errorf("%w: %s is a loopback address", errBlockedAddress, ip)
	case ip.IsPrivate():
		return fmt.Errorf("%w: %s is a private address", errBlockedAddress, ip)
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return fmt.Errorf("%w: %s is a link-local address", errBlockedAddress, ip)
	case ip.IsUnspecified():
		return fmt.Errorf("%w: %s is an unspecified address", errBlockedAddress, ip)
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is a multicast address", errBlockedAddress, ip)
	}
	if ip.Is4() {
		for _, p := range blockedPrefixes {
			if p.Contains(ip) {
				return fmt.Errorf("%w: %s is in the reserved range %s", errBlockedAddress, ip, p)
			}
		}
	}
	return nil
}

// dialControl runs on every connection the fetch client opens, after name
// resolution and before connecting, so it sees the address actually used:
// redirects and DNS rebinding cannot get past it.
func dialControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", errBlockedAddress, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", errBlockedAddress, host)
	}
	return checkFetchAddr(ip)
}

var fetchClient = newFetchClient()

func newFetchClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: dialControl}
	return &http.Client{
		Transport: &http.Transport{
			// no proxy: a proxy would connect on our behalf, past the check
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 10 * time.Second,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxImageRedirects {
				return fmt.Errorf("more than %d redirects", maxImageRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s: URL", req.URL.Scheme)
			}
			return nil
		},
	}
}

// FetchImage downloads an image a client gave by URL, for an upstream that
// only takes inline bytes. It is bounded in size (MaxImageBytes) and time
// (ImageFetchTimeout) and refuses to connect to loopback, private,
// link-local and other non-public addresses, also after redirects. Errors
// are *Error 400s that say what was wrong with the URL.
func FetchImage(ctx context.Context, rawURL string) (*Image, error) {
	img, err := fetchImage(ctx, rawURL)
	if err != nil {
		imageFetchesFailed.Add(1)
	} else {
		imageFetchesOK.Add(1)
	}
	return img, err
}

// Image fetches by outcome, process-wide, for the gateway's metrics.
var imageFetchesOK, imageFetchesFailed atomic.Uint64

// ImageFetches reports how many FetchImage calls succeeded and failed.
func ImageFetches() (ok, failed uint64) {
	return imageFetchesOK.Load(), imageFetchesFailed.Load()
}

func fetchImage(ctx context.Context, rawURL string) (*Image, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, BadRequest("image URL %q must be an absolute http(s) URL", shorten(rawURL))
	}
	ctx, cancel := context.WithTimeout(ctx, ImageFetchTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, BadRequest("image URL %q is invalid: %v", shorten(rawURL), err)
	}
	hr.Header.Set("Accept", "image/*")
	hr.Header.Set("User-Agent", "caddy-model-gateway image fetch")
	resp, err := fetchClient.Do(hr)
	if err != nil {
		switch {
		case errors.Is(err, errBlockedAddress):
			return nil, BadRequest("image URL %q was not fetched: it points to a non-public address (%v); give a public URL or send the image inline as base64", shorten(rawURL), unwrapBlocked(err))
		case errors.Is(err, context.DeadlineExceeded):
			return nil, BadRequest("image URL %q did not answer within %s; send the image inline as base64", shorten(rawURL), ImageFetchTimeout)
		}
		return nil, BadRequest("image URL %q could not be fetched: %v", shorten(rawURL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, BadRequest("image URL %q answered HTTP %d", shorten(rawURL), resp.StatusCode)
	}
	if resp.ContentLength > MaxImageBytes {
		return nil, BadRequest("image at %q is %d bytes, more than the %d allowed", shorten(rawURL), resp.ContentLength, MaxImageBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes+1))
	if err != nil {
		return nil, BadRequest("image URL %q could not be read: %v", shorten(rawURL), unwrapURLError(err))
	}
	if int64(len(data)) > MaxImageBytes {
		return nil, BadRequest("image at %q is more than the %d bytes allowed", shorten(rawURL), MaxImageBytes)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(mediaType, "image/") {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if !strings.HasPrefix(mediaType, "image/") {
		return nil, BadRequest("URL %q is not an image (it is %s)", shorten(rawURL), mediaType)
	}
	return &Image{URL: "", MediaType: mediaType, Data: data}, nil
}

func unwrapBlocked(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), errBlockedAddress.Error()) {
			return e
		}
	}
	return err
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// shorten keeps error messages readable when a client sends a huge URL.
func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
