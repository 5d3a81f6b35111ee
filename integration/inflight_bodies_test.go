package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Request bodies in flight: held as they arrive, shared out per key and
// per client address, refused before they are read when no body could
// make the request pass, and cut when they arrive too slowly. A caller
// who opens many connections and stalls their bodies must not stall
// anyone else.

// bodiesConfig is a gateway whose every model costs something (so an
// empty balance may ask for nothing) with a chat model and a
// transcription model. Its bodies may stall for ten minutes: a test that
// gets its answer did not wait for the server to give up on the body.
func bodiesConfig(options ...string) *caddyfile {
	c := gatewayConfig().
		withServers(block("timeouts", "read_body_idle 10m")).
		channel("up", "openai", "{{UP}}", "sk-up-bodies", "gpt-4o-mini whisper-1").
		price("gpt-4o-mini", "input 0.15", "output 0.60").
		price("whisper-1", "audio_second 0.0001")
	for _, o := range options {
		c.option(o)
	}
	return c
}

type bodiesSetup struct {
	gw *gatewaytest.Gateway
	up *gatewaytest.FakeOpenAI
}

func startBodies(t *testing.T, cfg *caddyfile) *bodiesSetup {
	t.Helper()
	s := &bodiesSetup{up: gatewaytest.NewFakeOpenAI(t, "sk-up-bodies")}
	s.gw = gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": s.up.URL})
	return s
}

// chatWith is a chat completion with the OpenAI SDK as key, no retries.
func (s *bodiesSetup) chatWith(key string) (*openai.ChatCompletion, error) {
	c := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"))
}

// answer is what a raw connection was answered: the status, headers and
// body, or err when the connection ended without an answer.
type answer struct {
	status int
	header http.Header
	body   string
	length int64 // the declared Content-Length, -1 for none
	err    error
}

// stalled is a request sent by hand that stalls in its body.
type stalled struct {
	conn     net.Conn
	answered chan answer
}

// stall sends, from the local address from ("" for any), a request's
// line and headers (head, without the blank line), declaring a body of
// declared bytes, then the first bytes of that body, and stalls. The
// answer, when one comes, is on answered.
func stall(t *testing.T, gw *gatewaytest.Gateway, from, head string, declared int, first []byte) *stalled {
	t.Helper()
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	conn, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", gw.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n", head, gw.Port, declared)
	if _, err := conn.Write(first); err != nil {
		t.Fatal(err)
	}
	st := &stalled{conn: conn, answered: make(chan answer, 1)}
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			st.answered <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		st.answered <- answer{status: resp.StatusCode, header: resp.Header, body: string(b), length: resp.ContentLength}
	}()
	return st
}

// TestRefusedRowSurvivesKill: a request refused before its body is read
// (a chat and an upload with an empty balance, whose bodies stall) has
// the whole answer at once, its length declared, while the connection
// lingers. Its usage row is in the inflight log before that answer goes
// out: killed with -9 right after the client read it, the gateway has
// both rows after a restart. Settled when the handler returned, after the
// two-second linger, the rows were lost.
func TestRefusedRowSurvivesKill(t *testing.T) {
	s := startBodies(t, bodiesConfig())
	broke := s.gw.AddUser("broke", 0)
	chat := stall(t, s.gw, "", chatHead(broke)+"\r\nX-Request-Id: refused-chat", 32<<20, nil)
	upload := stall(t, s.gw, "", "POST /v1/audio/transcriptions HTTP/1.1\r\nAuthorization: Bearer "+broke+
		"\r\nContent-Type: multipart/form-data; boundary=b\r\nX-Request-Id: refused-upload", 32<<20, nil)
	for what, st := range map[string]*stalled{"the chat": chat, "the upload": upload} {
		if a := st.wait(t, what); a.status != http.StatusTooManyRequests || a.length != int64(len(a.body)) {
			t.Fatalf("%s: %d, Content-Length %d for %d bytes: %s", what, a.status, a.length, len(a.body), a.body)
		}
	}
	s.gw.Kill()
	s.gw.Restart()
	rows := s.gw.WaitUsage("broke", 0)
	found := map[string]int{}
	for _, r := range rows {
		found[r.RequestID] = r.Status
	}
	if found["refused-chat"] != http.StatusTooManyRequests || found["refused-upload"] != http.StatusTooManyRequests {
		t.Fatalf("after kill -9, the refused requests' rows: %v (want both, 429)", found)
	}
}

// chatHead is the head of a chat completion with key.
func chatHead(key string) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json"
}

// wait is the answer to st, which must come while its body is still
// unsent; a minute is only a safety net (the body may stall for ten).
func (st *stalled) wait(t *testing.T, what string) answer {
	t.Helper()
	select {
	case a := <-st.answered:
		if a.err != nil {
			t.Fatalf("%s: no answer: %v", what, a.err)
		}
		return a
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer while the body stalls", what)
	}
	return answer{}
}

// unanswered fails the test if st was answered.
func (st *stalled) unanswered(t *testing.T, what string) {
	t.Helper()
	select {
	case a := <-st.answered:
		t.Fatalf("%s was answered while its body stalls: %d %s %v", what, a.status, a.body, a.err)
	default:
	}
}

// oneRefused waits for the answer to one of x and y, and returns the
// other, which must stay unanswered, and the answer.
func oneRefused(t *testing.T, x, y *stalled) (*stalled, answer) {
	t.Helper()
	var a answer
	select {
	case a = <-x.answered:
		x, y = y, x
	case a = <-y.answered:
	case <-time.After(time.Minute):
		t.Fatal("neither stalled body was refused")
	}
	if a.err != nil {
		t.Fatalf("no answer: %v", a.err)
	}
	x.unanswered(t, "the other stalled body")
	return x, a
}

// code is the error code of an OpenAI-shaped error body.
func code(body string) string {
	e, _ := errorBody([]byte(body))
	return e.Code
}

// TestStalledChatBodiesStallNoOneElse is the attack issue 30 found by
// probe: ten connections that declare a 32 MiB chat body and send one
// byte took the whole max_inflight_body (256 MiB, charged at the
// declared size) and every other user got 503 while they stayed open.
// From a key whose balance is empty they are now refused before their
// body is read; from a key with a balance they hold what they sent, and
// another user is served meanwhile.
func TestStalledChatBodiesStallNoOneElse(t *testing.T) {
	s := startBodies(t, bodiesConfig())
	broke := s.gw.AddUser("mallory", 0, "--max-parallel", "1")
	paying := s.gw.AddUser("trudy", 10_000_000, "--max-parallel", "1")
	victim := s.gw.AddUser("victor", 10_000_000)

	var held []*stalled
	for range 10 {
		held = append(held, stall(t, s.gw, "", chatHead(broke), 32<<20, []byte("{")))
	}
	for i, st := range held {
		a := st.wait(t, fmt.Sprintf("stalled body %d of an empty balance", i))
		if a.status != http.StatusTooManyRequests || code(a.body) != "insufficient_quota" || a.header.Get("X-Should-Retry") != "false" {
			t.Fatalf("stalled body %d of an empty balance: %d %v %s", i, a.status, a.header, a.body)
		}
	}
	if _, err := s.chatWith(victim); err != nil {
		t.Fatalf("another user, after an empty balance's stalled bodies: %v", err)
	}

	held = held[:0]
	for range 10 {
		held = append(held, stall(t, s.gw, "", chatHead(paying), 32<<20, []byte("{")))
	}
	// the stalled bodies hold what they sent: the victim is served again
	// and again while they stall
	for i := range 5 {
		if _, err := s.chatWith(victim); err != nil {
			t.Fatalf("another user's request %d while ten 32 MiB bodies stall: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond) // give the stalled bodies every chance to reach the gateway
	}
	for i, st := range held {
		st.unanswered(t, fmt.Sprintf("stalled body %d", i))
		st.conn.Close()
	}
	// none of them cost anything or reached the upstream
	if _, used := s.gw.Quota("mallory"); used != 0 {
		t.Fatalf("the refused bodies used %d units", used)
	}
	if n := len(s.up.Requests()); n != 6 {
		t.Fatalf("the upstream got %d requests, want the victim's 6", n)
	}
}

// TestBodySharesPerKeyAndAddress: one key's bodies in flight hold at
// most max_inflight_body_per_key, one address's at most
// max_inflight_body_per_address; past its share a caller gets a 429
// (it waits for its own requests, as with max_parallel) at once, while
// others, from the same address too, are served.
func TestBodySharesPerKeyAndAddress(t *testing.T) {
	s := startBodies(t, bodiesConfig(
		"max_request_body 1MB",
		"max_inflight_body 16MB",
		"max_inflight_body_per_key 1500KB",
		"max_inflight_body_per_address 1500KB"))
	alice := s.gw.AddUser("alice", 10_000_000)
	carol := s.gw.AddUser("carol", 10_000_000)
	dave := s.gw.AddUser("dave", 10_000_000)
	erin := s.gw.AddUser("erin", 10_000_000)
	// each stalled body sends 800 KB of a 1 MB body: it holds at least
	// that and at most the whole body, so one fits a share of 1.5 MB and
	// two never do
	part := append([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`), bytes.Repeat([]byte("a"), 800_000)...)

	// of two such bodies of one key (from two addresses), the one that
	// comes second to its share is refused, the other read on
	held, a := oneRefused(t,
		stall(t, s.gw, "127.0.0.2", chatHead(alice), 1_000_000, part),
		stall(t, s.gw, "127.0.0.3", chatHead(alice), 1_000_000, part))
	if a.status != http.StatusTooManyRequests || code(a.body) != "too_many_bodies_in_flight" || a.header.Get("Retry-After") == "" ||
		!strings.Contains(a.body, "API key") || !strings.Contains(a.body, "max_inflight_body_per_key") {
		t.Fatalf("a key past its share: %d %v %s", a.status, a.header, a.body)
	}
	// and of two of one address (two keys)
	held2, a := oneRefused(t,
		stall(t, s.gw, "127.0.0.4", chatHead(carol), 1_000_000, part),
		stall(t, s.gw, "127.0.0.4", chatHead(dave), 1_000_000, part))
	if a.status != http.StatusTooManyRequests || code(a.body) != "too_many_bodies_in_flight" ||
		!strings.Contains(a.body, "your address") || !strings.Contains(a.body, "max_inflight_body_per_address") {
		t.Fatalf("an address past its share: %d %v %s", a.status, a.header, a.body)
	}

	// a small request from the same address, and one from alice's key,
	// still fit
	small := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	st := stall(t, s.gw, "127.0.0.4", chatHead(erin), len(small), small)
	if a := st.wait(t, "a small request from the busy address"); a.status != http.StatusOK {
		t.Fatalf("a small request from the busy address: %d %s", a.status, a.body)
	}
	if _, err := s.chatWith(alice); err != nil {
		t.Fatalf("a small request of the busy key: %v", err)
	}
	// the refusals cost nothing; once the stalled bodies go, their room
	// is back
	held.conn.Close()
	held2.conn.Close()
	whole := append(bytes.Clone(part), []byte(`"}]}`)...)
	eventually(t, "the key's share to come back", func() bool {
		resp, _ := s.gw.Do("POST", "/v1/chat/completions", alice, whole, nil)
		return resp.StatusCode == http.StatusOK
	})
	for _, u := range []string{"carol", "dave"} {
		if _, used := s.gw.Quota(u); used != 0 {
			t.Fatalf("%s's refused bodies used %d units", u, used)
		}
	}
}

// TestRefusedBeforeTheBody: a request no body could make pass is
// answered at once, in its dialect, to a client that has sent its
// headers and nothing of its body: an unknown key, an empty balance, a
// key over its rpm or at its max_parallel, for chat, Anthropic's
// messages and a multipart upload.
func TestRefusedBeforeTheBody(t *testing.T) {
	s := startBodies(t, bodiesConfig())
	broke := s.gw.AddUser("broke", 0)
	limited := s.gw.AddUser("limited", 10_000_000, "--rpm", "1")
	single := s.gw.AddUser("single", 10_000_000, "--max-parallel", "1")
	if _, err := s.chatWith(limited); err != nil {
		t.Fatal(err)
	}

	upload := func(key string) string {
		return "POST /v1/audio/transcriptions HTTP/1.1\r\nAuthorization: Bearer " + key + "\r\nContent-Type: multipart/form-data; boundary=b"
	}
	messages := func(key string) string {
		return "POST /v1/messages HTTP/1.1\r\nX-Api-Key: " + key + "\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json"
	}
	check := func(what, head string, status int, errCode string) answer {
		t.Helper()
		a := stall(t, s.gw, "", head, 32<<20, nil).wait(t, what)
		if a.status != status || !strings.Contains(a.body, errCode) {
			t.Fatalf("%s: %d %s, want %d %s", what, a.status, a.body, status, errCode)
		}
		// whole at once: a chunked answer would end only after the
		// connection's lingering close, seconds later
		if a.length != int64(len(a.body)) {
			t.Fatalf("%s: Content-Length %d for a body of %d bytes", what, a.length, len(a.body))
		}
		return a
	}
	check("an unknown key", chatHead("sk-not-a-key"), http.StatusUnauthorized, "invalid_api_key")
	a := check("an empty balance", chatHead(broke), http.StatusTooManyRequests, "insufficient_quota")
	if a.header.Get("X-Should-Retry") != "false" || !strings.Contains(a.body, "top up") {
		t.Fatalf("an empty balance: %v %s", a.header, a.body)
	}
	a = check("a key over its rpm", chatHead(limited), http.StatusTooManyRequests, "rate_limit_exceeded")
	if a.header.Get("Retry-After") == "" || !strings.Contains(a.body, "1 requests a minute") {
		t.Fatalf("a key over its rpm: %v %s", a.header, a.body)
	}
	check("an upload with an empty balance", upload(broke), http.StatusTooManyRequests, "insufficient_quota")
	check("an upload over rpm", upload(limited), http.StatusTooManyRequests, "rate_limit_exceeded")
	// Anthropic's shape for Anthropic's path
	a = check("messages with an empty balance", messages(broke), http.StatusTooManyRequests, "rate_limit_error")
	var ant struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(a.body), &ant) != nil || ant.Type != "error" {
		t.Fatalf("messages with an empty balance, not in Anthropic's shape: %s", a.body)
	}

	// a key at its max_parallel, while its one request streams
	s.up.Set(func(b *gatewaytest.Behavior) {
		b.Reply = "one two three four five six"
		b.ChunkDelay = 200 * time.Millisecond
	})
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest("POST", s.gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+single)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %v %v", err, resp)
	}
	a = check("a key at its max_parallel", chatHead(single), http.StatusTooManyRequests, "1 requests at once")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if a.header.Get("Retry-After") == "" {
		t.Fatalf("a key at its max_parallel: %v", a.header)
	}

	// nothing was sent on, nor charged
	if n := len(s.up.Requests()); n != 2 {
		t.Fatalf("the upstream got %d requests, want the 2 admitted", n)
	}
	if _, used := s.gw.Quota("broke"); used != 0 {
		t.Fatalf("the refusals used %d units", used)
	}
}

// TestSlowBodiesCut: with a minimum body rate (Caddy's timeouts
// read_body_idle <grace> <bytes a second>), a body that trickles is cut
// and answered 408, while one sent slowly but above the rate is served;
// Caddyfile.example sets one that a slow phone's 25 MB upload meets.
func TestSlowBodiesCut(t *testing.T) {
	cfg := bodiesConfig().withServers(block("timeouts", "read_body_idle 3s 4096"))
	s := startBodies(t, cfg)
	key := s.gw.AddUser("slow", 10_000_000)
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 16<<10) + `"}]}`)

	// 16 KiB at 8 KiB a second, twice the minimum: served
	st := stall(t, s.gw, "", chatHead(key), len(body), nil)
	for chunk := range slicesOf(body, 1<<10) {
		if _, err := st.conn.Write(chunk); err != nil {
			t.Fatalf("a steady body was cut: %v", err)
		}
		time.Sleep(time.Second / 8)
	}
	if a := st.wait(t, "a slow, steady body"); a.status != http.StatusOK {
		t.Fatalf("a slow, steady body: %d %s", a.status, a.body)
	}

	// ten bytes a second: cut, with a 408, long before it is all sent
	st = stall(t, s.gw, "", chatHead(key), len(body), nil)
	go func() {
		for chunk := range slicesOf(body, 10) {
			if _, err := st.conn.Write(chunk); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
	}()
	a := st.wait(t, "a trickling body")
	if a.status != http.StatusRequestTimeout || code(a.body) != "request_timeout" {
		t.Fatalf("a trickling body: %d %s", a.status, a.body)
	}
}

// slicesOf yields b in pieces of n bytes.
func slicesOf(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			k := min(n, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}
