package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// waitLog waits until logs() holds want, and returns what it holds.
func waitLog(t *testing.T, logs func() string, want string) string {
	t.Helper()
	var text string
	within(t, 10*time.Second, fmt.Sprintf("%q in the log", want), func() bool {
		text = logs()
		return strings.Contains(text, want)
	})
	return text
}

// TestExampleLogHidesRealtimeSubprotocolKey: a browser can send its key
// only as the WebSocket subprotocol openai-insecure-api-key.<key>; the
// example's access log must not hold it.
func TestExampleLogHidesRealtimeSubprotocolKey(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	fake := gatewaytest.NewFakeOpenAI(t, "sk-example-realtime-upstream")
	fake.SetRealtimeUsage(realtimeTurn)
	port := gatewaytest.FreePort(t)
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port))
	t.Setenv("GATEWAY_ADMIN", fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t)))
	t.Setenv("GATEWAY_DB", filepath.Join(t.TempDir(), "gateway.db"))
	t.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	t.Setenv("OPENAI_API_KEY", "sk-example-realtime-upstream")
	gw := gatewaytest.Start(t, string(example), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	gw.DBPath = os.Getenv("GATEWAY_DB")
	key := gw.AddUser("browser", 5_000_000)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d/v1/realtime?model=%s", port, realtimeModel), &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key." + key, "openai-beta.realtime-v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subprotocol() != "realtime" {
		t.Fatalf("negotiated %q, want realtime", c.Subprotocol())
	}
	c.Close(websocket.StatusNormalClosure, "")

	logs := waitLog(t, gw.Logs, `"uri":"/v1/realtime?model=`+realtimeModel)
	if strings.Contains(logs, key) {
		t.Fatalf("the access log holds the key sent as a subprotocol:\n%s", logs)
	}
	// the other subprotocols are still there to debug a negotiation
	if !strings.Contains(logs, "openai-beta.realtime-v1") {
		t.Fatalf("the access log lost the request's other subprotocols:\n%s", logs)
	}
}

// failureLogConfig: "solo" is served by one failing channel; "pair" by
// a failing channel and, below it, a working one.
func failureLogConfig() *caddyfile {
	return gatewayConfig().
		channel("solo", "openai", "{{DOWN}}", "sk-failure-log-down", "solo").
		channel("first", "openai", "{{DOWN}}", "sk-failure-log-down", "pair", "priority 10").
		channel("second", "openai", "{{UP}}", "sk-failure-log-up", "pair").
		free("solo", "pair")
}

// logLine is a line of the gateway's JSON log, as far as these tests read it.
type logLine struct {
	Msg      string `json:"msg"`
	Channel  string `json:"channel"`
	Failures int    `json:"failures"`
	Upstream string `json:"upstream"`
}

func gatewayLogLines(t *testing.T, gw *gatewaytest.Gateway) []logLine {
	t.Helper()
	var out []logLine
	for _, text := range strings.Split(gw.Logs(), "\n") {
		var l logLine
		if json.Unmarshal([]byte(text), &l) == nil && l.Msg != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestUpstreamOutageLogsOncePerInterval: an outage fails every request;
// the log says so once a second per channel with a count, not once or
// twice a request, and says "trying the next channel" only when there is
// one.
func TestUpstreamOutageLogsOncePerInterval(t *testing.T) {
	down := gatewaytest.NewFakeOpenAI(t, "sk-failure-log-down")
	down.Set(func(b *gatewaytest.Behavior) { b.FailStatus = http.StatusServiceUnavailable })
	up := gatewaytest.NewFakeOpenAI(t, "sk-failure-log-up")
	gw := gatewaytest.Start(t, failureLogConfig().String(), gatewaytest.Vars{"DOWN": down.BaseURL(), "UP": up.BaseURL()})
	key := gw.AddUser("outage", 1_000_000)
	chat := func(model string) int {
		resp, _ := gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`), nil)
		return resp.StatusCode
	}

	const requests = 400
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < requests/8; i++ {
				if chat("solo") == http.StatusServiceUnavailable {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() != requests {
		t.Fatalf("%d of %d requests failed with 503, want all", failed.Load(), requests)
	}

	solo := func() (lines []logLine) {
		for _, l := range gatewayLogLines(t, gw) {
			if l.Channel == "solo" && (strings.HasPrefix(l.Msg, "channel failed") || strings.HasPrefix(l.Msg, "upstream")) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	// one line a second at most, whatever the rate of failures
	lines := solo()
	if most := int(elapsed/time.Second) + 1; len(lines) == 0 || len(lines) > most {
		t.Fatalf("%d log lines about channel solo for %d failures in %v, want 1 to %d:\n%s", len(lines), requests, elapsed, most, gw.Logs())
	}
	for _, l := range lines {
		if l.Msg != "channel failed; no other channel to try" || !strings.Contains(l.Upstream, "HTTP 503") {
			t.Fatalf("channel solo, the model's only channel, logged %+v", l)
		}
	}
	// the failures held back are counted on the next line: keep failing
	// until one is written, then every failure is accounted for
	sent := requests
	within(t, 10*time.Second, "a new line about channel solo", func() bool {
		if len(solo()) != len(lines) {
			return true
		}
		chat("solo")
		sent++
		time.Sleep(50 * time.Millisecond)
		return false
	})
	total := 0
	for _, l := range solo() {
		total += l.Failures
	}
	if total != sent {
		t.Fatalf("the log lines count %d failures of channel solo, want %d", total, sent)
	}

	// with a channel left to try, the wording says so, and the request
	// succeeds there
	if status := chat("pair"); status != http.StatusOK {
		t.Fatalf("pair answered %d, want 200 from the second channel", status)
	}
	// the line reaches the test through the gateway's stderr, which can be
	// after the answer did (CI: none yet when read at once)
	var first []logLine
	within(t, 10*time.Second, "a line about channel first", func() bool {
		first = first[:0]
		for _, l := range gatewayLogLines(t, gw) {
			if l.Channel == "first" {
				first = append(first, l)
			}
		}
		return len(first) > 0
	})
	if len(first) != 1 || first[0].Msg != "channel failed; trying the next channel" || first[0].Failures != 1 {
		t.Fatalf("channel first logged %+v, want one line saying the next channel is tried", first)
	}
}

// plainLogConfig: a site's own access log, as a Caddy user writes one,
// with no filter and Caddy's defaults (log_credentials off).
func plainLogConfig() *caddyfile {
	return gatewayConfig().
		channel("demo", "demo", "", "", "demo").
		free("demo").
		withSite(
			block("log", "output file {{LOG}}", "format json"),
			block("route",
				"gateway_auth",
				"# placeholders read after gateway_auth see the request as stripped",
				`header X-Seen "{http.request.uri} {http.request.header.X-Api-Key} {http.request.header.X-Goog-Api-Key} {http.request.header.Sec-Websocket-Protocol}"`,
				"gateway_relay"))
}

// TestKeysStayOutOfAnyAccessLog: whichever way a key is sent, a site's
// plain access log (no filter) holds none, while still logging each
// request as Caddy does.
func TestKeysStayOutOfAnyAccessLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "access.log")
	gw := gatewaytest.Start(t, plainLogConfig().String(), gatewaytest.Vars{"LOG": logFile})
	gw.CLI("user", "add", "--username", "logs", "--password", "password-logs", "--quota", "1000000")
	keys := map[string]string{}
	for _, how := range []string{"authorization", "x-api-key", "x-goog-api-key", "query", "subprotocol"} {
		keys[how] = gw.AddToken("logs")
	}
	keys["bad x-api-key"] = "sk-not-a-gateway-key-but-secret-all-the-same"
	gatewaytest.Secret(keys["bad x-api-key"])

	var seen []string
	send := func(path string, header http.Header, body string) {
		t.Helper()
		resp, _ := gw.Do(http.MethodPost, path, "", []byte(body), header)
		seen = append(seen, resp.Header.Get("X-Seen"))
	}
	send("/v1/chat/completions", http.Header{"Authorization": {"Bearer " + keys["authorization"]}}, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
	messages := `{"model":"demo","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	send("/v1/messages", http.Header{"X-Api-Key": {keys["x-api-key"]}, "Anthropic-Version": {"2023-06-01"}}, messages)
	send("/v1/messages", http.Header{"X-Api-Key": {keys["bad x-api-key"]}, "Anthropic-Version": {"2023-06-01"}}, messages)
	gemini := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	send("/v1beta/models/demo:generateContent", http.Header{"X-Goog-Api-Key": {keys["x-goog-api-key"]}}, gemini)
	send("/v1beta/models/demo:generateContent?alt=json&key="+keys["query"], nil, gemini)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// the demo channel has no Realtime: the upgrade is refused after the
	// key is read, which is all this needs
	if c, _, err := websocket.Dial(ctx, strings.Replace(gw.URL, "http", "ws", 1)+"/v1/realtime?model=demo", &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key." + keys["subprotocol"]}}); err == nil {
		c.Close(websocket.StatusNormalClosure, "")
	}

	read := func() string {
		b, _ := os.ReadFile(logFile)
		return string(b)
	}
	var lines []map[string]any
	within(t, 10*time.Second, fmt.Sprintf("%d access log lines", len(keys)), func() bool {
		lines = lines[:0]
		for _, text := range strings.Split(read(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(text), &l) == nil && l["msg"] == "handled request" {
				lines = append(lines, l)
			}
		}
		return len(lines) >= len(keys)
	})
	text := read()
	// one line a request: the gateway's took the place of Caddy's (both
	// are written before the answer ends)
	if len(lines) != len(keys) {
		t.Fatalf("%d access log lines for %d requests:\n%s", len(lines), len(keys), text)
	}
	for how, key := range keys {
		if strings.Contains(text, key) || strings.Contains(gw.Logs(), key) {
			t.Errorf("the key sent as %s is in the log:\n%s", how, text)
		}
		for _, s := range seen {
			if strings.Contains(s, key) {
				t.Errorf("a placeholder read after gateway_auth holds the key sent as %s: %s", how, s)
			}
		}
	}
	if !slices.Contains(seen, "/v1beta/models/demo:generateContent?alt=json") {
		t.Errorf("the placeholders saw %q", seen)
	}
	// still Caddy's line: the request (the query's other parameters kept),
	// its status and the gateway's fields
	var sawQuery, sawUser bool
	for _, l := range lines {
		sawUser = sawUser || l["gateway_user"] == "logs"
		req, _ := l["request"].(map[string]any)
		if req == nil || req["headers"] == nil || l["status"] == nil || l["request_id"] == nil {
			t.Fatalf("an access log line lost Caddy's fields: %v", l)
		}
		if uri, _ := req["uri"].(string); strings.HasPrefix(uri, "/v1beta/models/demo:generateContent?") {
			sawQuery = uri == "/v1beta/models/demo:generateContent?alt=json"
		}
	}
	if !sawUser {
		t.Fatalf("no access log line names the gateway user:\n%s", text)
	}
	if !sawQuery {
		t.Fatalf("the request with the key in its query was not logged with its other parameters:\n%s", text)
	}
}
