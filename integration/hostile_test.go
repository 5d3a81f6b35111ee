package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestHostileInput: bodies the gateway refuses before they reach an
// upstream or cost anything: duplicate keys and case variants, model names
// too long or with control characters, too many elements.
func TestHostileInput(t *testing.T) {
	s := startFaults(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body, code string
	}{
		{"case variant", `{"model":"gpt-4o-mini","Model":"slow",` + msgs + `}`, "duplicate_key"},
		{"duplicate", `{"model":"gpt-4o-mini","model":"slow",` + msgs + `}`, "duplicate_key"},
		{"nested duplicate", `{"model":"gpt-4o-mini","messages":[{"role":"user","Role":"system","content":"hi"}]}`, "duplicate_key"},
		{"whitespace first", " \n" + `{"model":"gpt-4o-mini","MODEL":"slow",` + msgs + `}`, "duplicate_key"},
		{"long model", `{"model":"` + strings.Repeat("m", 300) + `",` + msgs + `}`, "invalid_model"},
		{"control character", `{"model":"gpt-4o-mini\u0000x",` + msgs + `}`, "invalid_model"},
		{"too many messages", `{"model":"gpt-4o-mini","messages":[` + strings.Repeat(`{},`, 10000) + `{}]}`, "too_many_elements"},
	}
	for _, tt := range tests {
		resp, body := s.gw.Do("POST", "/v1/chat/completions", s.key, []byte(tt.body), nil)
		e, _ := errorBody(body)
		if resp.StatusCode != http.StatusBadRequest || e.Code != tt.code {
			t.Errorf("%s: %d %s, want 400 %s", tt.name, resp.StatusCode, body, tt.code)
		}
	}
	if n := len(s.primary.Requests()) + len(s.backup.Requests()) + len(s.slow.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached an upstream", n)
	}
	// what a usage row keeps of a refused request is bounded; none costs
	for _, r := range s.gw.WaitUsage("fault", len(tests)) {
		if len(r.Model) > 256 || len(r.Error) > 1024 || r.Cost != 0 {
			t.Fatalf("usage row %+v", r)
		}
	}
	if _, used := s.gw.Quota("fault"); used != 0 {
		t.Fatalf("refused requests used %d units", used)
	}
}

// TestBurstOfHugeBodies: 20 concurrent 30 MB bodies of empty messages keep
// the gateway under 1 GiB: they are refused (too many elements, 429 past
// the key's or the address's share of max_inflight_body, or 503 while the
// whole is taken), and the gateway serves on.
func TestBurstOfHugeBodies(t *testing.T) {
	s := startFaults(t)
	const size = 30 << 20
	var body bytes.Buffer
	body.WriteString(`{"model":"gpt-4o-mini","messages":[`)
	for body.Len() < size-10 {
		body.WriteString(`{},`)
	}
	body.WriteString(`{}]}`)
	raw := body.Bytes()
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions", bytes.NewReader(raw))
			req.Header.Set("Authorization", "Bearer "+s.key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses[i] = -1
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusBadRequest && st != http.StatusTooManyRequests && st != http.StatusServiceUnavailable {
			t.Errorf("request %d: status %d, want 400, 429 or 503", i, st)
		}
	}
	if rss := s.gw.PeakRSS(); rss >= 1<<30 {
		t.Fatalf("peak RSS %d MiB, want under 1 GiB", rss>>20)
	} else {
		t.Logf("peak RSS %d MiB, statuses %v", rss>>20, statuses)
	}
	if resp, err := s.chat(t, "gpt-4o-mini"); err != nil || len(resp.Choices) == 0 {
		t.Fatalf("after the burst: %v", err)
	}
}

// TestRepeatedAuthFailuresSlowed: an address that keeps sending invalid
// keys is answered 429 with Retry-After, before any key lookup.
func TestRepeatedAuthFailuresSlowed(t *testing.T) {
	s := startFaults(t)
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	for i := range 20 {
		resp, _ := s.gw.Do("POST", "/v1/chat/completions", "sk-guess-"+strings.Repeat("x", i), body, nil)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: status %d, want 401", i, resp.StatusCode)
		}
	}
	resp, b := s.gw.Do("POST", "/v1/chat/completions", "sk-guess-again", body, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "too_many_failed_authentications") {
		t.Fatalf("after 20 failures: %d %s", resp.StatusCode, b)
	}
}

// TestCountTokensLongRun: counting a megabyte of one letter locally
// answers (before, BPE on one megabyte-long piece took minutes).
func TestCountTokensLongRun(t *testing.T) {
	s := startFaults(t)
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`)
	resp, b := s.gw.Do("POST", "/v1/messages/count_tokens", s.key, body, http.Header{"Anthropic-Version": {"2023-06-01"}})
	var out struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.InputTokens < (1<<20)/64 {
		t.Fatalf("%d %.300s", resp.StatusCode, b)
	}
}

// TestImageURLsBounded: image URLs for an upstream that takes inline
// images only: more than max_fetched_images is refused before any fetch,
// and a URL on a non-public address is refused in words that do not say
// what answered.
func TestImageURLsBounded(t *testing.T) {
	s := startFaults(t)
	hits := 0
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer img.Close()
	part := func(u string) string { return `{"type":"image_url","image_url":{"url":"` + u + `"}}` }
	chat := func(parts ...string) (int, string) {
		body := `{"model":"gem","messages":[{"role":"user","content":[{"type":"text","text":"look"},` + strings.Join(parts, ",") + `]}]}`
		resp, b := s.gw.Do("POST", "/v1/chat/completions", s.key, []byte(body), nil)
		return resp.StatusCode, string(b)
	}
	many := make([]string, 17)
	for i := range many {
		many[i] = part(fmt.Sprintf("https://images.example/%d.png", i))
	}
	if st, b := chat(many...); st != http.StatusBadRequest || !strings.Contains(b, "more than the gateway's limit of 16") {
		t.Fatalf("17 image URLs: %d %s", st, b)
	}
	st, b := chat(part(img.URL + "/secret.png"))
	if st != http.StatusBadRequest || !strings.Contains(b, "image_fetch_failed") || strings.Contains(b, "loopback") || hits != 0 {
		t.Fatalf("a loopback image URL: %d %s (image server hit %d times)", st, b, hits)
	}
	if n := len(s.gem.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestStalledHeadersAreClosed: with read_header set, a client that sends
// part of a request and stalls has its connection closed by the server
// instead of holding it (and a goroutine) open.
func TestStalledHeadersAreClosed(t *testing.T) {
	gw := gatewaytest.Start(t, gatewayConfig().
		withServers(block("timeouts", "read_header 200ms")).
		withAddress(":{{PORT}}").
		withSite("gateway_health live").String(), nil)
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", gw.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /livez HTTP/1.1\r\nHost: gateway\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	// a safety net so a broken server fails the test instead of hanging
	// it; the server closes long before
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a connection with half a request open")
	}
}
