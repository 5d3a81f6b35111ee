package adapters

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckFetchAddr(t *testing.T) {
	tests := []struct {
		ip      string
		allowed bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700:4700::1111", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"172.31.255.255", false},
		{"172.32.0.1", true},
		{"192.168.1.1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"0.1.2.3", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"100.64.0.1", false},
		{"100.127.255.254", false},
		{"100.128.0.1", true},
		{"198.18.0.1", false},
		{"255.255.255.255", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.1.1.1", false},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::a00:1", false},     // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", true},    // NAT64 of 8.8.8.8
		{"64:ff9b::7f00:1", false},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false}, // NAT64 of 169.254.169.254
		{"fec0::1", false},            // site-local
		{"64:ff9b:1::808:808", false}, // local-use NAT64
		{"::7f00:1", false},           // IPv4-compatible 127.0.0.1
		{"::808:808", false},          // IPv4-compatible, deprecated
		{"2002:7f00:1::1", false},     // 6to4 of 127.0.0.1
		{"2002:808:808::1", false},    // 6to4, deprecated
		{"::ffff:0:a00:1", false},     // IPv4-translated 10.0.0.1
		{"::ffff:169.254.169.254", false},
	}
	for _, tt := range tests {
		err := checkFetchAddr(netip.MustParseAddr(tt.ip))
		if (err == nil) != tt.allowed {
			t.Errorf("%s: allowed=%v, err=%v", tt.ip, tt.allowed, err)
		}
		if err != nil && !errors.Is(err, errBlockedAddress) {
			t.Errorf("%s: error %v does not wrap errBlockedAddress", tt.ip, err)
		}
	}
}

func TestDialControl(t *testing.T) {
	ctx := context.Background()
	if err := dialControl(ctx, "tcp", "93.184.216.34:443", nil); err != nil {
		t.Fatalf("public address refused: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "10.1.2.3:80", "[fe80::1%eth0]:80", "localhost:80", "nonsense",
		"93.184.216.34:22", "93.184.216.34:8080", "[2606:4700:4700::1111]:6379"} {
		if err := dialControl(ctx, "tcp", addr, nil); err == nil {
			t.Errorf("%s allowed", addr)
		}
	}
	// a policy that names other ports allows those instead
	p := NewFetchPolicy(16, 1<<20, 4)
	p.Ports = []int{8443}
	ctx = WithImageFetcher(ctx, p.NewFetcher())
	if err := dialControl(ctx, "tcp", "93.184.216.34:8443", nil); err != nil {
		t.Errorf("a configured port refused: %v", err)
	}
	if err := dialControl(ctx, "tcp", "93.184.216.34:443", nil); err == nil {
		t.Error("443 allowed though the policy names only 8443")
	}
}

// pngBytes is the start of a PNG file, enough for content sniffing.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{0}, 32)...)

func TestFetchImageRefusesLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	}))
	defer srv.Close()
	_, err := FetchImage(context.Background(), srv.URL+"/a.png")
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Code != "image_fetch_failed" {
		t.Fatalf("loopback fetch not refused: %v", err)
	}
}

func withLoopback(t *testing.T) {
	allowLoopbackFetch = true
	t.Cleanup(func() { allowLoopbackFetch = false })
}

func TestFetchImage(t *testing.T) {
	withLoopback(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/typed.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png; charset=binary")
		w.Write(pngBytes)
	})
	mux.HandleFunc("/sniffed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(pngBytes)
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html><body>hi</body></html>"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
		w.Write(make([]byte, 2048))
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.255.255.1/x.png", http.StatusFound)
	})
	mux.HandleFunc("/metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/typed.png", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// a policy's per-image limit, so /big need not be 20 MiB
	policy := &FetchPolicy{MaxImages: 100, MaxBytes: 1 << 20, MaxImageBytes: 1024, slots: make(chan struct{}, 1)}
	fetch := func(u string) (*Image, error) {
		return FetchImage(WithImageFetcher(context.Background(), policy.NewFetcher()), u)
	}
	for _, path := range []string{"/typed.png", "/sniffed", "/hop"} {
		img, err := fetch(srv.URL + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if img.MediaType != "image/png" || !bytes.Equal(img.Data, pngBytes) || img.URL != "" {
			t.Fatalf("%s: got %s %d bytes", path, img.MediaType, len(img.Data))
		}
	}
	// every refusal says the same: nothing about what answered, or how
	var first string
	for _, path := range []string{"/html", "/big", "/missing", "/private", "/metadata", "/loop"} {
		_, err := fetch(srv.URL + path)
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != "image_fetch_failed" {
			t.Fatalf("%s: got %v, want a 400 image_fetch_failed", path, err)
		}
		msg := strings.ReplaceAll(e.Message, path, "")
		if first == "" {
			first = msg
		} else if msg != first {
			t.Errorf("%s: %q differs from %q", path, msg, first)
		}
		for _, leak := range []string{"404", "redirect", "link-local", "not an image", "non-public"} {
			if strings.Contains(e.Message, leak) {
				t.Errorf("%s: the message reveals %q: %s", path, leak, e.Message)
			}
		}
	}
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/a.png", "/relative.png", "http://"} {
		if _, err := FetchImage(context.Background(), u); err == nil {
			t.Errorf("%s: fetched", u)
		}
	}
}

// TestImageFetcherOncePerRequest: within one request a URL is fetched once
// however often it is asked for (a failover to a second channel), and the
// count and bytes of images are bounded.
func TestImageFetcherOncePerRequest(t *testing.T) {
	withLoopback(t)
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	}))
	defer srv.Close()
	p := NewFetchPolicy(2, int64(3*len(pngBytes)), 4)
	ctx := WithImageFetcher(context.Background(), p.NewFetcher())
	for range 3 { // three attempts of one request
		if _, err := FetchImage(ctx, srv.URL+"/a.png"); err != nil {
			t.Fatal(err)
		}
	}
	if hits != 1 {
		t.Fatalf("fetched %d times within one request, want 1", hits)
	}
	if _, err := FetchImage(ctx, srv.URL+"/b.png"); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchImage(ctx, srv.URL+"/c.png"); err == nil || !strings.Contains(err.Error(), "more than 2 images") {
		t.Fatalf("a third image: %v", err)
	}
	// the byte budget
	p = NewFetchPolicy(10, int64(len(pngBytes)+1), 4)
	ctx = WithImageFetcher(context.Background(), p.NewFetcher())
	if _, err := FetchImage(ctx, srv.URL+"/a.png"); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchImage(ctx, srv.URL+"/b.png"); err == nil || !strings.Contains(err.Error(), "add up to more than") {
		t.Fatalf("past the byte budget: %v", err)
	}
}
