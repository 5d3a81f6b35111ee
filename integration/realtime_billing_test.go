package integration

import (
	"context"
	"encoding/base64"
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
