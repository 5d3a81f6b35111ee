package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// What a Realtime session costs: each response reserved before it runs and
// settled on its usage, transcription by the second, the output cap, a
// quota that runs out mid-session, and a client that leaves mid-response.

// A user whose quota no longer covers a response's reservation gets an
// error event after the response that used it up, and the session ends
// with 1008; every response before is billed exactly.
func TestRealtimeQuotaRunsOut(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	// covers the first reservation, and a second after one turn (126300
	// left), not a third after two (92600 left)
	key := s.gw.AddUser("quinn", 160000)
	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	readEvent(t, c)
	exchangeTurn(t, c, false)
	exchangeTurn(t, c, false)
	ev := readEvent(t, c)
	if ev.Type != "error" || ev.Error == nil || ev.Error.Type != "insufficient_quota" || !strings.Contains(ev.Error.Message, "does not cover another Realtime response") {
		t.Fatalf("after the last response: %s", ev.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("the session ended with %v, want 1008", err)
	}
	eventually(t, "the upstream is closed", func() bool { return len(s.fake.RealtimeCloses()) == 1 })
	rows := s.gw.WaitUsage("quinn", 2)
	if len(rows) != 2 || rows[0].Cost != realtimeTurnCost || rows[1].Cost != realtimeTurnCost {
		t.Errorf("rows %+v", rows)
	}
	if _, used := s.gw.Quota("quinn"); used != 2*realtimeTurnCost {
		t.Errorf("used %d, want %d", used, 2*realtimeTurnCost)
	}
	// a new session is refused before the upgrade
	if _, resp, err := s.dial(t, key, nil); err == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a session without quota: %v %v", resp, err)
	}
}

// A client that leaves mid-response still pays for it: the gateway asks
// the upstream to cancel the response, bills the response.done that
// reports what it used, then closes the upstream with the client's code.
func TestRealtimeClientLeavesMidResponse(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	s.fake.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 300 * time.Millisecond })
	key := s.gw.AddUser("lea", 10_000_000)
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
	if err := c.Close(4004, "user hung up"); err != nil {
		t.Fatalf("close: %v", err)
	}
	eventually(t, "the upstream sees the client's close", func() bool {
		return slices.Contains(s.fake.RealtimeCloses(), gatewaytest.RealtimeClose{Code: 4004, Reason: "user hung up"})
	})
	if got := s.fake.RealtimeEvents(); !slices.Equal(got, []string{"session.update", "response.create", "response.cancel"}) {
		t.Errorf("the upstream received %v", got)
	}
	rows := s.gw.WaitUsage("lea", 1)
	if r := rows[0]; r.Cost != realtimeTurnCost || r.PromptTokens != 600 || r.Status != 200 {
		t.Errorf("row %+v", r)
	}
	if _, used := s.gw.Quota("lea"); used != realtimeTurnCost {
		t.Errorf("used %d, want %d", used, realtimeTurnCost)
	}
}

// pcm is seconds of silence as 24 kHz 16-bit PCM, base64, as
// input_audio_buffer.append carries it.
func pcm(seconds float64) string {
	return base64.StdEncoding.EncodeToString(make([]byte, int(seconds*48000)))
}

// Turning input audio transcription on costs what the audio sent is
// transcribed at, per second, without a response ever being asked for.
func TestRealtimeTranscriptionBilled(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("tess", 10_000_000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c) // session.created
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}}}`)
	if ev := readEvent(t, c); ev.Type != "session.updated" {
		t.Fatalf("got %s, want session.updated", ev.Raw)
	}
	// 2.5 seconds of speech, in two appends, then committed
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(1.5)+`"}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(1)+`"}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.commit"}`)
	readUntil(t, c, "conversation.item.input_audio_transcription.completed")
	c.Close(websocket.StatusNormalClosure, "")
	// 2500 ms at 100 units a second
	rows := s.gw.WaitUsage("tess", 1)
	if r := rows[0]; r.Cost != 250 || r.Status != 200 || r.Endpoint != "/v1/realtime" {
		t.Errorf("row %+v, want the transcription's 250 units", r)
	}
	if _, used := s.gw.Quota("tess"); used != 250 {
		t.Errorf("used %d, want 250", used)
	}
}

// A model without a price for transcription cannot turn it on: the client
// gets an error event and the upstream never sees the request.
func TestRealtimeTranscriptionUnpriced(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("ulla", 10_000_000)
	c := s.dialModel(t, key, "gpt-realtime-untranscribed")
	defer c.CloseNow()
	readEvent(t, c)
	sendEvent(t, c, `{"type":"session.update","session":{"input_audio_transcription":{"model":"whisper-1"}}}`)
	ev := readEvent(t, c)
	if ev.Type != "error" || ev.Error == nil || ev.Error.Code != "transcription_not_priced" || !strings.Contains(ev.Error.Message, "audio_second") {
		t.Fatalf("got %s, want an error event saying transcription has no price", ev.Raw)
	}
	// the session goes on: a later update is relayed
	sendEvent(t, c, `{"type":"session.update","session":{"instructions":"Be brief."}}`)
	if ev := readEvent(t, c); ev.Type != "session.updated" || strings.Contains(string(ev.Raw), "whisper-1") {
		t.Errorf("got %s", ev.Raw)
	}
	// the gateway's own update, then the client's second
	if got := s.fake.RealtimeEvents(); !slices.Equal(got, []string{"session.update", "session.update"}) {
		t.Errorf("the upstream received %v", got)
	}
}

// No response writes more than it reserved: a client's "inf" (in the
// session and in response.create) is lowered to the model's max_output,
// and so is the session's own default, which the responses the upstream's
// turn detection starts by itself get.
func TestRealtimeOutputCapped(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	// an answer of 5000 audio tokens, were it allowed
	long := realtimeTurn
	long.OutputText, long.OutputAudio = 0, 5000
	s.fake.SetRealtimeUsage(long)
	key := s.gw.AddUser("ines", 10_000_000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c)
	// turn detection on: each append is a spoken turn answered at once
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad"}}}}}`)
	readUntil(t, c, "session.updated")
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(0.5)+`"}`)
	readUntil(t, c, "response.done")
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","max_output_tokens":"inf","audio":{"input":{"turn_detection":null}}}}`)
	readUntil(t, c, "session.updated")
	sendEvent(t, c, `{"type":"response.create","response":{"max_output_tokens":"inf"}}`)
	readUntil(t, c, "response.done")
	sendEvent(t, c, `{"type":"response.create"}`)
	readUntil(t, c, "response.done")
	if got := s.fake.RealtimeCaps(); !slices.Equal(got, []int64{1000, 1000, 1000}) {
		t.Errorf("the responses ran with output caps %v, want 1000 each", got)
	}
	// 1000 audio tokens out: 80*5 + 20*2.5 + 400*40 + 100*2.5 + 1000*80
	const capped = 96700
	rows := s.gw.WaitUsage("ines", 3)
	for _, r := range rows {
		if r.Cost != capped || r.Cost > realtimeReservation {
			t.Errorf("row %+v, want %d, within the reservation %d", r, capped, realtimeReservation)
		}
	}
}

// Out-of-band responses run beside the default conversation's, each
// reserving its own: one the quota cannot cover beside those under way is
// refused with an error event and never reaches the upstream.
func TestRealtimeConcurrentResponses(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	s.fake.Set(func(b *gatewaytest.Behavior) { b.ChunkDelay = 100 * time.Millisecond })
	// covers two reservations (240000), not three
	key := s.gw.AddUser("otto", 300000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c)
	sendEvent(t, c, `{"type":"response.create"}`)
	sendEvent(t, c, `{"type":"response.create","response":{"conversation":"none","metadata":{"topic":"summary"}}}`)
	sendEvent(t, c, `{"type":"response.create","response":{"conversation":"none","metadata":{"topic":"title"}}}`)
	done, refused := 0, 0
	for done < 2 || refused < 1 {
		ev := readEvent(t, c)
		switch ev.Type {
		case "response.done":
			done++
		case "error":
			if ev.Error == nil || ev.Error.Type != "insufficient_quota" || !strings.Contains(ev.Error.Message, "alongside those under way") {
				t.Fatalf("error %s", ev.Raw)
			}
			refused++
		}
	}
	if got := s.fake.RealtimeEvents(); !slices.Equal(got, []string{"session.update", "response.create", "response.create"}) {
		t.Errorf("the upstream received %v", got)
	}
	// both responses billed; the session goes on
	exchangeTurn(t, c, false)
	rows := s.gw.WaitUsage("otto", 3)
	for _, r := range rows {
		if r.Cost != realtimeTurnCost {
			t.Errorf("row %+v", r)
		}
	}
	if _, used := s.gw.Quota("otto"); used != 3*realtimeTurnCost {
		t.Errorf("used %d, want %d", used, 3*realtimeTurnCost)
	}
}

// A conversation that has grown past a response's output cap is read again
// by the next response: the reservation waiting for it is raised to the
// conversation's size (the last response.done's tokens in and out), and a
// user whose quota does not cover that is told so and the session ends,
// rather than the next response reading more than was reserved.
func TestRealtimeReservationFollowsTheConversation(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	// 5000 audio tokens in, 50 text and 200 audio out:
	// 5000*40 + 50*20 + 200*80 = 217000 units
	s.fake.SetRealtimeUsage(gatewaytest.RealtimeUsage{InputAudio: 5000, OutputText: 50, OutputAudio: 200})
	const turn = 217000
	// after the turn 200000 are left: enough for another response of the
	// cap (120000), not for one that reads the 5250 tokens so far
	// (5250*40 + 1000*80 = 290000)
	key := s.gw.AddUser("cora", turn+200000)
	c, _, err := s.dial(t, key, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	readEvent(t, c)
	exchangeTurn(t, c, false)
	ev := readEvent(t, c)
	if ev.Type != "error" || ev.Error == nil || ev.Error.Type != "insufficient_quota" ||
		!strings.Contains(ev.Error.Message, "reads the 5250 tokens so far") {
		t.Fatalf("after a response that grew the conversation: %s", ev.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("the session ended with %v, want 1008", err)
	}
	if got := s.fake.RealtimeEvents(); slices.Index(got, "response.create") != len(got)-1 {
		t.Errorf("the upstream received %v: a second response.create", got)
	}
	if rows := s.gw.WaitUsage("cora", 1); len(rows) != 1 || rows[0].Cost != turn {
		t.Errorf("rows %+v, want one of %d", rows, turn)
	}
	if _, used := s.gw.Quota("cora"); used != turn {
		t.Errorf("used %d, want %d", used, turn)
	}
}

// What transcription costs follows the session's state as the upstream
// accepted it, never a client's session.update the upstream refused: an
// update that would turn transcription off, or change the audio's rate,
// and that the upstream refuses (an unsupported format, an unknown
// transcription model) leaves the audio billed as the upstream transcribes
// it. The client pipelines its events without waiting for the answers.
func TestRealtimeRefusedUpdateKeepsBilling(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("rory", 10_000_000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c) // session.created
	// transcription on, accepted: 10 s
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(10)+`"}`)
	// off, with a format the upstream does not take: refused, 20 s more
	// are transcribed
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":null,"format":{"type":"audio/flac"}}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(20)+`"}`)
	// PCM at ten times the rate: refused, so the next 30 s stay 30 s
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":"audio/pcm","rate":240000}}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(30)+`"}`)
	// off with an unknown transcription model: refused as well
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-9"}}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(10)+`"}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.commit"}`)
	var refusals int
	for _, typ := range readUntil(t, c, "conversation.item.input_audio_transcription.completed") {
		if typ == "error" {
			refusals++
		}
	}
	if refusals != 3 {
		t.Fatalf("the upstream refused %d updates, want 3", refusals)
	}
	// then turned off for real: what follows is not billed
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":null}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(5)+`"}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.commit"}`)
	readUntil(t, c, "input_audio_buffer.committed")
	c.Close(websocket.StatusNormalClosure, "")
	// 70 s at 100 units a second, in two rows (a minute a block)
	rows := s.gw.WaitUsage("rory", 2)
	var cost int64
	for _, r := range rows {
		cost += r.Cost
	}
	if cost != 7000 {
		t.Errorf("rows %+v: %d units, want 7000 (70 s transcribed)", rows, cost)
	}
	if _, used := s.gw.Quota("rory"); used != 7000 {
		t.Errorf("used %d, want 7000", used)
	}
}

// An accepted change of format changes what a second of audio is: G.711
// is 8000 bytes a second.
func TestRealtimeAcceptedFormatBilled(t *testing.T) {
	s := startRealtime(t, "h1 h2")
	key := s.gw.AddUser("gita", 10_000_000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c)
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"},"format":{"type":"audio/pcmu"}}}}}`)
	// 48000 bytes: 6 s of G.711
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(1)+`"}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.commit"}`)
	readUntil(t, c, "conversation.item.input_audio_transcription.completed")
	c.Close(websocket.StatusNormalClosure, "")
	if rows := s.gw.WaitUsage("gita", 1); rows[0].Cost != 600 {
		t.Errorf("row %+v, want 600 units (6 s)", rows[0])
	}
}

// A response's reservation covers the input it reads: the items added to
// the conversation since the last response, the session's items an
// out-of-band response names by item_reference, and the input it carries
// itself. Two responses asked for at once on a $1.00 account, each
// reading about 12000 tokens at $50 a million (617000 units each), cannot
// both run: the second is refused before it reaches the upstream, and the
// account never goes below zero.
func TestRealtimeReservationCoversInput(t *testing.T) {
	const dear = "gpt-realtime-dear"
	// 12000 text tokens in at 50, 50 text and 200 audio out:
	// 12000*50 + 50*20 + 200*80 = 617000 units
	const turn = 617000
	text := strings.Repeat("All work and no play. ", 14000/22)
	for name, second := range map[string]string{
		// the item the first response reads, named by reference
		"item_reference": `{"type":"response.create","response":{"conversation":"none","input":[{"type":"item_reference","id":"item_fake1"}]}}`,
		// the same text, carried by the response itself
		"input": `{"type":"response.create","response":{"conversation":"none","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			fake := gatewaytest.NewFakeOpenAI(t, "sk-rt-upstream")
			fake.Set(func(b *gatewaytest.Behavior) {
				b.Reply = "Hello from the realtime fake"
				b.ChunkDelay = 50 * time.Millisecond
			})
			fake.SetRealtimeUsage(gatewaytest.RealtimeUsage{InputText: 12000, OutputText: 50, OutputAudio: 200})
			cfg := gatewayConfig().withServers("protocols h1 h2").
				channel("oai", "openai", "{{OPENAI}}", "sk-rt-upstream", dear).
				price(dear, "input 50", "output 20", "audio_input 40", "audio_output 80", "max_output 1000")
			s := &realtimeSetup{fake: fake, vars: gatewaytest.Vars{"OPENAI": fake.BaseURL()}, cfg: cfg}
			s.gw = gatewaytest.Start(t, cfg.String(), s.vars)
			key := s.gw.AddUser("dora", 1_000_000)
			c := s.dialModel(t, key, dear)
			defer c.CloseNow()
			readEvent(t, c)
			sendEvent(t, c, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"`+text+`"}]}}`)
			if ev := readEvent(t, c); ev.Type != "conversation.item.created" {
				t.Fatalf("got %s", ev.Raw)
			}
			sendEvent(t, c, `{"type":"response.create"}`)
			sendEvent(t, c, second)
			done, refused := 0, 0
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for {
				_, msg, err := c.Read(ctx)
				if err != nil {
					break // the session ends once no response is affordable
				}
				var ev event
				_ = json.Unmarshal(msg, &ev)
				switch {
				case ev.Type == "response.done":
					done++
				case ev.Type == "error" && ev.Error != nil && strings.Contains(ev.Error.Message, "alongside those under way"):
					refused++
				}
			}
			if done != 1 || refused != 1 {
				t.Errorf("%d responses done, %d refused; want 1 and 1", done, refused)
			}
			if n := strings.Count(strings.Join(fake.RealtimeEvents(), " "), "response.create"); n != 1 {
				t.Errorf("the upstream received %d response.create, want 1", n)
			}
			rows := s.gw.WaitUsage("dora", 1)
			if rows[0].Cost != turn {
				t.Errorf("row %+v, want %d", rows[0], turn)
			}
			if quota, used := s.gw.Quota("dora"); used != turn || quota < 0 {
				t.Errorf("quota %d, used %d: want %d used and nothing owed", quota, used, turn)
			}
		})
	}
}

// Input audio sent after a session.update waits for the upstream's answer;
// an upstream that never answers ends the session after the channel's
// response_header_timeout (1011), and the audio never reaches it.
func TestRealtimeUnansweredUpdate(t *testing.T) {
	s := startRealtimeWith(t, "h1 h2", "response_header_timeout 1s")
	s.fake.SetRealtimeSilentUpdates(true)
	key := s.gw.AddUser("sid", 10_000_000)
	c := s.dialModel(t, key, realtimeModel)
	defer c.CloseNow()
	readEvent(t, c) // session.created
	sendEvent(t, c, `{"type":"session.update","session":{"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}}}`)
	sendEvent(t, c, `{"type":"input_audio_buffer.append","audio":"`+pcm(1)+`"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		if websocket.CloseStatus(err) != websocket.StatusInternalError {
			t.Fatalf("the session ended with %v, want 1011", err)
		}
		break
	}
	if got := s.fake.RealtimeEvents(); slices.Contains(got, "input_audio_buffer.append") {
		t.Errorf("the upstream received %v: the audio went unpriced", got)
	}
	if rows := s.gw.WaitUsage("sid", 1); rows[0].Cost != 0 || rows[0].Status != http.StatusGatewayTimeout {
		t.Errorf("row %+v", rows[0])
	}
}
