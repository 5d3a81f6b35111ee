package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// realtimeConfig: gpt-4o-realtime-preview on an OpenAI channel at
// OpenAI's prices (text 5 in, 2.50 cached, 20 out; audio 40 in, 80 out,
// USD per million; transcription 0.0001 USD, 100 units, a second of
// audio), each response reserving max_output 1000 tokens of audio in and
// out: 1000*40 + 1000*80 = 120000 units. gpt-realtime-untranscribed has
// no price for transcription. An anthropic model
// has no Realtime endpoint. protocols lets a test serve h2c; bounds are
// further lines of the OpenAI channel.
func realtimeConfig(protocols string, bounds ...string) *caddyfile {
	return gatewayConfig().
		withServers("protocols "+protocols).
		channel("oai", "openai", "{{OPENAI}}", "sk-rt-upstream", "gpt-4o-realtime-preview gpt-realtime-untranscribed", bounds...).
		channel("claude", "anthropic", "{{CLAUDE}}", "claude-rt-upstream", "claude-test").
		price("gpt-4o-realtime-preview", realtimePreviewPrice(1000)...).
		price("gpt-realtime-untranscribed", "input 5", "output 20", "max_output 1000").
		price("claude-test", "input 3", "output 15")
}

// realtimePreviewPrice is gpt-4o-realtime-preview's price, reserving
// maxOutput tokens a response.
func realtimePreviewPrice(maxOutput int) []string {
	return []string{"input 5", "cached_input 2.50", "output 20", "audio_input 40", "audio_output 80", "audio_second 0.0001",
		fmt.Sprintf("max_output %d", maxOutput)}
}

// realtimeTurn is what the fake reports for every response: 100 text
// tokens in (20 cached), 500 audio in (100 cached), 50 text and 200 audio
// out: 80*5 + 20*2.5 + 400*40 + 100*2.5 + 50*20 + 200*80 = 33700 units.
var realtimeTurn = gatewaytest.RealtimeUsage{InputText: 100, CachedText: 20, InputAudio: 500, CachedAudio: 100, OutputText: 50, OutputAudio: 200}

const (
	realtimeTurnCost    = 33700
	realtimeReservation = 120000
	realtimeModel       = "gpt-4o-realtime-preview"
)

type realtimeSetup struct {
	gw   *gatewaytest.Gateway
	fake *gatewaytest.FakeOpenAI
	vars gatewaytest.Vars
	cfg  *caddyfile
}

func startRealtime(t *testing.T, protocols string) *realtimeSetup {
	t.Helper()
	return startRealtimeWith(t, protocols)
}

// startRealtimeWith sets the OpenAI channel's bounds too.
func startRealtimeWith(t *testing.T, protocols string, bounds ...string) *realtimeSetup {
	t.Helper()
	s := &realtimeSetup{fake: gatewaytest.NewFakeOpenAI(t, "sk-rt-upstream")}
	s.fake.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the realtime fake" })
	s.fake.SetRealtimeUsage(realtimeTurn)
	claude := gatewaytest.NewFakeAnthropic(t, "claude-rt-upstream")
	s.vars = gatewaytest.Vars{"OPENAI": s.fake.BaseURL(), "CLAUDE": claude.BaseURL()}
	s.cfg = realtimeConfig(protocols, bounds...)
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	return s
}

func (s *realtimeSetup) url(model string) string {
	return "ws" + strings.TrimPrefix(s.gw.URL, "http") + "/v1/realtime?model=" + model
}

// dialModel opens a session on model with the key as a Bearer token.
func (s *realtimeSetup) dialModel(t *testing.T, key, model string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.url(model), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dial %s: %v", model, err)
	}
	return c
}

// dial opens a session with the key as a Bearer token.
func (s *realtimeSetup) dial(t *testing.T, key string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	if key != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + key}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, s.url(realtimeModel), opts)
}

// event is a server event as a client reads it.
type event struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
	Error *struct {
		Type, Code, Message string
	} `json:"error"`
	Raw []byte `json:"-"`
}

func readEvent(t *testing.T, c *websocket.Conn) event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("a %v message", typ)
	}
	var ev event
	if err := json.Unmarshal(msg, &ev); err != nil {
		t.Fatalf("event %s: %v", msg, err)
	}
	ev.Raw = msg
	return ev
}

func sendEvent(t *testing.T, c *websocket.Conn, ev string) {
	t.Helper()
	if err := c.Write(context.Background(), websocket.MessageText, []byte(ev)); err != nil {
		t.Fatalf("sending %s: %v", ev, err)
	}
}

// readUntil reads events up to and including one of type last, and
// returns their types.
func readUntil(t *testing.T, c *websocket.Conn, last string) []string {
	t.Helper()
	var types []string
	for {
		ev := readEvent(t, c)
		types = append(types, ev.Type)
		if ev.Type == last {
			return types
		}
	}
}

// respondedTypes is what the fake sends for one response.create.
func respondedTypes(reply string, beta bool) []string {
	delta, done := "response.output_text.delta", "response.output_text.done"
	if beta {
		delta, done = "response.text.delta", "response.text.done"
	}
	types := []string{"response.created"}
	for range strings.Fields(reply) {
		types = append(types, delta)
	}
	return append(types, done, "response.done")
}

// exchange plays a conversation turn: an item, a response, the events in
// the order the upstream sent them.
func exchangeTurn(t *testing.T, c *websocket.Conn, beta bool) {
	t.Helper()
	sendEvent(t, c, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello"}]}}`)
	if ev := readEvent(t, c); ev.Type != "conversation.item.created" {
		t.Fatalf("got %s, want conversation.item.created", ev.Raw)
	}
	sendEvent(t, c, `{"type":"response.create"}`)
	got := readUntil(t, c, "response.done")
	if want := respondedTypes("Hello from the realtime fake", beta); !slices.Equal(got, want) {
		t.Fatalf("response events %v, want %v", got, want)
	}
}

// A whole session over HTTP/1.1: the upgrade, events both ways in order,
// the channel's key upstream and never the client's, a response billed
// from its response.done, the client's close code and reason passed on.
func TestRealtimeSession(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("rae", 10_000_000)
	c, resp, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ev := readEvent(t, c); ev.Type != "session.created" {
		t.Fatalf("first event %s", ev.Raw)
	}
	sendEvent(t, c, `{"type":"session.update","session":{"instructions":"Be brief.","modalities":["text"]}}`)
	if ev := readEvent(t, c); ev.Type != "session.updated" || !strings.Contains(string(ev.Raw), "Be brief.") {
		t.Fatalf("got %s, want session.updated", ev.Raw)
	}
	exchangeTurn(t, c, false)
	// a burst of events arrives upstream in the order sent
	burst := []string{"input_audio_buffer.append", "input_audio_buffer.append", "input_audio_buffer.commit", "conversation.item.create"}
	for _, typ := range burst {
		ev := `{"type":"` + typ + `","audio":"AAAA"}`
		if typ == "conversation.item.create" {
			ev = `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"More"}]}}`
		}
		sendEvent(t, c, ev)
	}
	if got := readUntil(t, c, "conversation.item.created"); !slices.Equal(got, []string{"input_audio_buffer.committed", "conversation.item.created"}) {
		t.Errorf("burst answered with %v", got)
	}
	// the gateway's own session.update (the output cap) comes first
	want := append([]string{"session.update", "session.update", "conversation.item.create", "response.create"}, burst...)
	if got := s.fake.RealtimeEvents(); !slices.Equal(got, want) {
		t.Errorf("the upstream received %v, want %v", got, want)
	}
	hs := s.fake.Requests()[0]
	if hs.Path != "/v1/realtime" || hs.Model != realtimeModel || hs.Header.Get("Authorization") != "Bearer sk-rt-upstream" {
		t.Errorf("upstream handshake %s model %q auth %q", hs.Path, hs.Model, hs.Header.Get("Authorization"))
	}
	for name, vs := range hs.Header {
		for _, v := range vs {
			if strings.Contains(v, key) {
				t.Errorf("the client's key reached the upstream in %s", name)
			}
		}
	}

	// one response: exactly its price, one row
	rows := s.gw.WaitUsage("rae", 1)
	r := rows[0]
	if r.Endpoint != "/v1/realtime" || r.Channel != "oai" || r.Model != realtimeModel || r.Status != 200 || !r.Stream ||
		r.PromptTokens != 600 || r.CachedTokens != 120 || r.CompletionTokens != 250 || r.Cost != realtimeTurnCost || r.Estimated {
		t.Errorf("usage row %+v", r)
	}
	if _, used := s.gw.Quota("rae"); used != realtimeTurnCost {
		t.Errorf("used %d units, want %d", used, realtimeTurnCost)
	}

	// the client's close code and reason reach the upstream
	if err := c.Close(4001, "client says goodbye"); err != nil {
		t.Fatalf("close: %v", err)
	}
	eventually(t, "the upstream sees the client's close", func() bool {
		return slices.Contains(s.fake.RealtimeCloses(), gatewaytest.RealtimeClose{Code: 4001, Reason: "client says goodbye"})
	})
	// a session with responses has no row of its own: the next row is the
	// next session's (another key's), a session without a response
	other := s.gw.AddToken("rae")
	c2, _, err := s.dial(t, other, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	readEvent(t, c2)
	c2.Close(websocket.StatusNormalClosure, "")
	rows = s.gw.WaitUsage("rae", 2)
	if len(rows) != 2 || rows[1].TokenID == rows[0].TokenID || rows[1].Cost != 0 {
		t.Errorf("rows after the first session: %+v", rows)
	}
}

// The upstream's close code and reason reach the client; a session without
// a response gets one row, free.
func TestRealtimeUpstreamClose(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("uma", 10_000_000)
	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	readEvent(t, c) // session.created
	s.fake.CloseRealtime(4002, "upstream says goodbye")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4002 || ce.Reason != "upstream says goodbye" {
		t.Fatalf("the client read %v, want close 4002 'upstream says goodbye'", err)
	}
	rows := s.gw.WaitUsage("uma", 1)
	if r := rows[0]; r.Cost != 0 || r.Endpoint != "/v1/realtime" || r.Channel != "oai" || r.Status != 200 || r.Estimated {
		t.Errorf("session row %+v", r)
	}
	if _, used := s.gw.Quota("uma"); used != 0 {
		t.Errorf("used %d", used)
	}
}

// The key is checked before the upgrade, from the Authorization header or
// from the subprotocol browsers use; a failure is a 401 in JSON and no
// socket, and nothing reaches the upstream.
func TestRealtimeAuth(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("ava", 10_000_000)
	for name, opts := range map[string]*websocket.DialOptions{
		"bad bearer":      {HTTPHeader: http.Header{"Authorization": {"Bearer sk-not-a-gateway-key"}}},
		"bad subprotocol": {Subprotocols: []string{"realtime", "openai-insecure-api-key.sk-not-a-gateway-key", "openai-beta.realtime-v1"}},
		"no key":          {Subprotocols: []string{"realtime"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, resp, err := websocket.Dial(ctx, s.url(realtimeModel), opts)
		cancel()
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: the socket opened", name)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %v %v, want a 401", name, resp, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"type":"authentication_error"`) {
			t.Errorf("%s: body %s", name, body)
		}
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Errorf("the upstream got %d handshakes", n)
	}
	// a browser's key subprotocol works, is answered "realtime", and the
	// beta marker it sent asks the upstream for the beta interface
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.url(realtimeModel), &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key." + key, "openai-beta.realtime-v1"}})
	if err != nil {
		t.Fatalf("subprotocol key: %v", err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "realtime" {
		t.Errorf("subprotocol %q, want realtime", c.Subprotocol())
	}
	readEvent(t, c)
	exchangeTurn(t, c, true)
	hs := s.fake.Requests()[0]
	if hs.Header.Get("OpenAI-Beta") != "realtime=v1" || strings.Contains(hs.Header.Get("Sec-Websocket-Protocol"), key) {
		t.Errorf("upstream handshake headers %v", hs.Header)
	}
	c.Close(websocket.StatusNormalClosure, "")
	if strings.Contains(s.gw.Logs(), key) {
		t.Error("the key subprotocol reached the gateway's logs")
	}
}

// What the endpoint cannot do is refused before the upgrade, in JSON.
func TestRealtimeRefusals(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("rex", 10_000_000)
	for name, c := range map[string]struct {
		path   string
		status int
		says   string
	}{
		"no model":      {"/v1/realtime", 400, "the Realtime model is required"},
		"unknown model": {"/v1/realtime?model=nope", 404, "does not exist on this gateway"},
		"no realtime":   {"/v1/realtime?model=claude-test", 400, "no Realtime endpoint"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.gw.URL, "http")+c.path, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		cancel()
		if err == nil {
			conn.CloseNow()
			t.Errorf("%s: the socket opened", name)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", name, resp.StatusCode, body, c.status, c.says)
		}
	}
	// a plain GET is told to open a socket
	resp, body := s.gw.Do(http.MethodGet, "/v1/realtime?model="+realtimeModel, key, nil, nil)
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), "WebSocket endpoint") {
		t.Errorf("plain GET: %d %s", resp.StatusCode, body)
	}
	// the upstream refusing the channel's key
	s.fake.Set(func(b *gatewaytest.Behavior) { b.FailStatus = http.StatusServiceUnavailable })
	if _, resp, err := s.dial(t, key, nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("upstream 503: %v %v", resp, err)
	}
	if _, used := s.gw.Quota("rex"); used != 0 {
		t.Errorf("refusals cost %d", used)
	}
}

// The same session over HTTP/2 cleartext with an extended CONNECT, which
// the gateway offers by itself (Go's HTTP/2 server only with
// GODEBUG=http2xconnect=1, which the gateway sets: internal/h2xconnect).
func TestRealtimeHTTP2(t *testing.T) {
	s := startRealtime(t, "h1 h2 h2c")
	key := s.gw.AddUser("hal", 10_000_000)
	c, resp, err := s.dial(t, key, &websocket.DialOptions{HTTPClient: gatewaytest.ExtendedConnectClient()})
	if err != nil {
		t.Fatalf("dial over HTTP/2: %v", err)
	}
	defer c.CloseNow()
	if p := gatewaytest.ProtoOf(resp); p != "HTTP/2.0" {
		t.Fatalf("the handshake went over %q", p)
	}
	if ev := readEvent(t, c); ev.Type != "session.created" {
		t.Fatalf("first event %s", ev.Raw)
	}
	exchangeTurn(t, c, false)
	rows := s.gw.WaitUsage("hal", 1)
	if rows[0].Cost != realtimeTurnCost || rows[0].Endpoint != "/v1/realtime" {
		t.Errorf("row %+v", rows[0])
	}
	if err := c.Close(4003, "h2 client leaves"); err != nil {
		t.Fatalf("close: %v", err)
	}
	eventually(t, "the upstream sees the close", func() bool {
		return slices.Contains(s.fake.RealtimeCloses(), gatewaytest.RealtimeClose{Code: 4003, Reason: "h2 client leaves"})
	})
	// and a bad key is refused before the stream opens
	if _, resp, err := s.dial(t, "sk-wrong", &websocket.DialOptions{HTTPClient: gatewaytest.ExtendedConnectClient()}); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad key over HTTP/2: %v %v", resp, err)
	}
}

// A message past the channel's max_stream_event ends the session, from
// either side; a session silent past stream_idle_timeout is closed.
func TestRealtimeBounds(t *testing.T) {
	s := startRealtimeWith(t, "h1 h2", "max_stream_event 4KB", "stream_idle_timeout 1s")
	key := s.gw.AddUser("bo", 10_000_000)
	readClose := func(c *websocket.Conn) websocket.CloseError {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			_, _, err := c.Read(ctx)
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce
			}
			if err != nil {
				t.Fatalf("the session ended with %v, not a close frame", err)
			}
		}
	}

	// the client sends too much
	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	readEvent(t, c)
	_ = c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"input_audio_buffer.append","audio":"`+strings.Repeat("A", 5000)+`"}`))
	if ce := readClose(c); ce.Code != websocket.StatusMessageTooBig {
		t.Errorf("an oversized client message: close %v, want 1009", ce)
	}
	eventually(t, "the upstream is closed with 1009", func() bool {
		return slices.ContainsFunc(s.fake.RealtimeCloses(), func(c gatewaytest.RealtimeClose) bool { return c.Code == 1009 })
	})
	c.CloseNow()

	// the upstream sends too much: session.updated echoes the session,
	// instructions and all, past 4KB (4000 bytes) while the client's update is under it
	c, _, err = s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	readEvent(t, c)
	sendEvent(t, c, `{"type":"session.update","session":{"instructions":"`+strings.Repeat("x", 3890)+`"}}`)
	if ce := readClose(c); ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, "upstream message was too large") {
		t.Errorf("an oversized upstream message: close %v, want 1011", ce)
	}
	c.CloseNow()

	// nobody says anything
	c, _, err = s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	readEvent(t, c)
	if ce := readClose(c); ce.Code != websocket.StatusGoingAway || !strings.Contains(ce.Reason, "idle") {
		t.Errorf("an idle session: close %v, want 1001", ce)
	}
	// three sessions without a response: three free rows
	for _, r := range s.gw.WaitUsage("bo", 3) {
		if r.Cost != 0 || r.Endpoint != "/v1/realtime" {
			t.Errorf("row %+v", r)
		}
	}
}

// A reload ends Realtime sessions with 1001, as Caddy's reverse_proxy ends
// its WebSockets, once the response under way is cancelled and billed; the
// client reconnects to the new configuration.
func TestRealtimeReload(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	s.fake.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 300 * time.Millisecond })
	key := s.gw.AddUser("rory", 10_000_000)
	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	readEvent(t, c)
	sendEvent(t, c, `{"type":"response.create"}`)
	if ev := readEvent(t, c); ev.Type != "response.created" {
		t.Fatalf("got %s", ev.Raw)
	}
	s.gw.Reload(s.cfg.price("gpt-4o-realtime-preview", realtimePreviewPrice(999)...).String(), s.vars)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sawDone := false
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || !strings.Contains(ce.Reason, "reconnect") {
				t.Fatalf("the session ended with %v, want 1001", err)
			}
			break
		}
		sawDone = sawDone || strings.Contains(string(msg), `"response.done"`)
	}
	if !sawDone {
		t.Error("the cancelled response's response.done did not reach the client")
	}
	if got := s.fake.RealtimeEvents(); !slices.Equal(got, []string{"session.update", "response.create", "response.cancel"}) {
		t.Errorf("the upstream received %v", got)
	}
	if r := s.gw.WaitUsage("rory", 1)[0]; r.Cost != realtimeTurnCost {
		t.Errorf("row %+v", r)
	}
	// the new configuration serves the next session
	c2, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial after the reload: %v", err)
	}
	defer c2.CloseNow()
	if ev := readEvent(t, c2); ev.Type != "session.created" {
		t.Errorf("got %s", ev.Raw)
	}
}
