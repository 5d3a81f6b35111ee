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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits of one image fetch. A FetchPolicy may lower the size for its
// requests (MaxImageBytes).
const (
	DefaultMaxImageBytes int64 = 20 << 20
	imageFetchTimeout          = 15 * time.Second
	maxImageRedirects          = 5
)

// allowLoopbackFetch lets tests fetch from an httptest server on 127.0.0.1;
// nothing else may set it.
var allowLoopbackFetch = false

// defaultFetchPorts are the only ports a fetch connects to unless its
// FetchPolicy names others.
var defaultFetchPorts = []int{80, 443}

// errBlockedAddress marks a refused dial.
var errBlockedAddress = errors.New("address not allowed")

// checkFetchAddr refuses what CheckPublicAddr refuses (loopback, in
// tests, aside).
func checkFetchAddr(ip netip.Addr) error {
	if allowLoopbackFetch && ip.Unmap().IsLoopback() {
		return nil
	}
	if err := CheckPublicAddr(ip); err != nil {
		return fmt.Errorf("%w: %w", errBlockedAddress, err)
	}
	return nil
}

// dialControl runs on every connection the fetch client opens, after name
// resolution and before connecting, so it sees the address actually used:
// redirects and DNS rebinding cannot get past it.
func dialControl(ctx context.Context, network, address string, _ syscall.RawConn) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", errBlockedAddress, err)
	}
	ports := defaultFetchPorts
	if f, ok := ctx.Value(fetcherKey{}).(*ImageFetcher); ok && len(f.policy.Ports) > 0 {
		ports = f.policy.Ports
	}
	if n, err := strconv.Atoi(port); (err != nil || !slices.Contains(ports, n)) && !allowLoopbackFetch {
		return fmt.Errorf("%w: port %s is not one of %v", errBlockedAddress, port, ports)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", errBlockedAddress, host)
	}
	return checkFetchAddr(ip)
}

var fetchClient = newFetchClient()

func newFetchClient() *http.Client {
	// the dial's context carries the request's values (its ImageFetcher)
	dialer := &net.Dialer{Timeout: 5 * time.Second, ControlContext: dialControl}
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
// only takes inline bytes. It is bounded in size (DefaultMaxImageBytes, or
// the request's FetchPolicy's MaxImageBytes) and time and refuses to connect to loopback, private,
// link-local and other non-public addresses, or to ports other than 80 and
// 443, also after redirects. Within a request whose context carries an
// ImageFetcher, each URL is fetched once however many channels are tried,
// and the request's count and bytes of images are bounded.
//
// Errors are *Error 400s. Past a malformed URL they all say the same: a
// client must not learn from them what answered, with what status, or how
// fast (the gateway would be a port scanner for the networks it sits in).
func FetchImage(ctx context.Context, rawURL string) (*Image, error) {
	var img *Image
	var err error
	if f, ok := ctx.Value(fetcherKey{}).(*ImageFetcher); ok {
		img, err = f.fetch(ctx, rawURL)
	} else {
		img, err = fetchImage(ctx, rawURL, DefaultMaxImageBytes)
	}
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

func fetchImage(ctx context.Context, rawURL string, limit int64) (*Image, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, BadRequest("image URL %q must be an absolute http(s) URL", shorten(rawURL))
	}
	ctx, cancel := context.WithTimeout(ctx, imageFetchTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, BadRequest("image URL %q must be an absolute http(s) URL", shorten(rawURL))
	}
	hr.Header.Set("Accept", "image/*")
	hr.Header.Set("User-Agent", "caddy-model-gateway image fetch")
	resp, err := fetchClient.Do(hr)
	if err != nil {
		return nil, notFetched(rawURL, limit)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength > limit {
		return nil, notFetched(rawURL, limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil || int64(len(data)) > limit {
		return nil, notFetched(rawURL, limit)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(mediaType, "image/") {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if !strings.HasPrefix(mediaType, "image/") {
		return nil, notFetched(rawURL, limit)
	}
	return &Image{URL: "", MediaType: mediaType, Data: data}, nil
}

// notFetched is every fetch failure's one answer.
func notFetched(rawURL string, limit int64) *Error {
	e := BadRequest("the image at %q could not be used: give a public http(s) URL of an image of at most %d bytes, or send the image inline as base64",
		shorten(rawURL), limit)
	e.Code = "image_fetch_failed"
	return e
}

// ImageFetcher fetches the images of one request: each URL once, however
// many channels are tried, at most max images and maxBytes in all, and
// through the process-wide slots of its FetchPolicy.
type ImageFetcher struct {
	policy *FetchPolicy
	mu     sync.Mutex
	done   map[string]fetchResult
	bytes  int64
}

type fetchResult struct {
	img *Image
	err error
}

// FetchPolicy bounds image fetching process-wide: the gateway makes one.
type FetchPolicy struct {
	MaxImages int   // per request
	MaxBytes  int64 // per request, all images together
	// MaxImageBytes bounds one image; 0: DefaultMaxImageBytes.
	MaxImageBytes int64
	// Ports a fetch may connect to; empty: 80 and 443.
	Ports []int
	slots chan struct{}
}

// NewFetchPolicy allows concurrent fetches at once across the process.
func NewFetchPolicy(maxImages int, maxBytes int64, concurrent int) *FetchPolicy {
	return &FetchPolicy{MaxImages: maxImages, MaxBytes: maxBytes, slots: make(chan struct{}, concurrent)}
}

// NewFetcher returns the fetcher of one request.
func (p *FetchPolicy) NewFetcher() *ImageFetcher {
	return &ImageFetcher{policy: p}
}

type fetcherKey struct{}

// WithImageFetcher returns ctx carrying f, which FetchImage then uses.
func WithImageFetcher(ctx context.Context, f *ImageFetcher) context.Context {
	return context.WithValue(ctx, fetcherKey{}, f)
}

func (f *ImageFetcher) fetch(ctx context.Context, rawURL string) (*Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock() // one fetch at a time per request
	if r, ok := f.done[rawURL]; ok {
		return r.img, r.err
	}
	if len(f.done) >= f.policy.MaxImages {
		return nil, BadRequest("the request gives more than %d images by URL: send the others inline as base64", f.policy.MaxImages)
	}
	select {
	case f.policy.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	limit := f.policy.MaxImageBytes
	if limit <= 0 {
		limit = DefaultMaxImageBytes
	}
	img, err := fetchImage(ctx, rawURL, limit)
	<-f.policy.slots
	if err == nil {
		if f.bytes+int64(len(img.Data)) > f.policy.MaxBytes {
			img, err = nil, BadRequest("the request's images given by URL add up to more than %d bytes: send fewer or smaller images", f.policy.MaxBytes)
		} else {
			f.bytes += int64(len(img.Data))
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // not cached: the request is over anyway
	}
	if f.done == nil {
		f.done = map[string]fetchResult{}
	}
	f.done[rawURL] = fetchResult{img, err}
	return img, err
}

// shorten keeps error messages readable when a client sends a huge URL.
func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
