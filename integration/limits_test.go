package integration

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// burst sends n requests at once and counts the answers by status; it
// returns one 429 to inspect.
func burst(t *testing.T, gw *gatewaytest.Gateway, key, model string, n int) (map[int]int, reply) {
	var mu sync.Mutex
	counts := map[int]int{}
	var limited reply
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := chat(t, gw, key, model, false)
			mu.Lock()
			counts[r.status]++
			if r.status == 429 {
				limited = r
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return counts, limited
}

// TestRateLimitsHoldExactly: rpm from the gateway-wide default and from a
// key's own setting hold exactly under concurrent requests, for a free
// model and a zero balance too; over the limit is a 429 worth retrying,
// with Retry-After, and a usage row.
func TestRateLimitsHoldExactly(t *testing.T) {
	s := startBilling(t, "{{DB}}", block("limits", "rpm 4"))
	byDefault := s.gw.AddUser("lim", 0)
	own := s.gw.AddToken("lim", "--rpm", "3")

	counts, limited := burst(t, s.gw, byDefault, "free-model", 12)
	if counts[200] != 4 || counts[429] != 8 {
		t.Fatalf("default rpm 4: %v", counts)
	}
	if limited.header.Get("Retry-After") == "" || limited.header.Get("X-Should-Retry") == "false" ||
		!strings.Contains(limited.body, "rate_limit") || !strings.Contains(limited.body, "4 requests a minute") {
		t.Fatalf("429: %v %s", limited.header, limited.body)
	}
	counts, _ = burst(t, s.gw, own, "free-model", 12)
	if counts[200] != 3 || counts[429] != 9 {
		t.Fatalf("the key's own rpm 3: %v", counts)
	}
	rows := s.gw.WaitUsage("lim", 24)
	n429 := 0
	for _, r := range rows {
		if r.Status == 429 {
			n429++
		}
	}
	if len(rows) != 24 || n429 != 17 {
		t.Fatalf("%d rows, %d of them 429; want 24 and 17", len(rows), n429)
	}
	// token set changes it (within the key cache's TTL)
	s.gw.CLI("token", "set", "--id", "2", "--rpm", "100")
}

// TestMaxParallelPerUser: a user's max_parallel counts every key's
// requests in flight; the one over it is refused at once.
func TestMaxParallelPerUser(t *testing.T) {
	s := startBilling(t, "{{DB}}", "")
	k1 := s.gw.AddUser("pam", 100_000_000)
	s.gw.CLI("user", "set", "--username", "pam", "--max-parallel", "2")
	k2 := s.gw.AddToken("pam")
	if u := s.gw.User("pam"); u.Limits.MaxParallel != 2 {
		t.Fatalf("limits = %+v", u.Limits)
	}
	s.up.Set(func(b *gatewaytest.Behavior) {
		b.Reply = "one two three four five"
		b.ChunkDelay = 40 * time.Millisecond
	})
	var streams []*http.Response
	for _, k := range []string{k1, k2} {
		req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", err, resp)
		}
		streams = append(streams, resp)
	}
	r := chat(t, s.gw, k1, "free-model", false)
	if r.status != 429 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "2 requests at once") {
		t.Fatalf("third request in flight: %d %v %s", r.status, r.header, r.body)
	}
	for _, resp := range streams {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		resp.Body.Close()
	}
	eventually(t, "a slot to free", func() bool { return chat(t, s.gw, k2, "free-model", false).status == 200 })
}
