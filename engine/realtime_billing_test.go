package engine

import (
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// realtimeSession is a session as Relay starts it, without sockets: its
// admission's reservation waits for the first response.
func realtimeSession(t *testing.T, quota int64, price *billing.Price) (*RealtimeSession, *rows) {
	t.Helper()
	rs := &rows{}
	g := &billing.Gate{Limiter: billing.NewLimiter(), Ledger: billing.NewLedger(), Usage: queue{}}
	e := &Engine{Gate: g, Rows: rs, Meter: &meter{}, Log: zap.NewNop(), DefaultMaxTokens: 4096}
	id := &keys.Identity{User: &store.User{ID: 1, Quota: quota}, Token: &store.Token{ID: 2}}
	x := &Exchange{R: httptest.NewRequest("GET", "/v1/realtime?model=m", nil), ID: id, Start: time.Now(), Channel: "a",
		Req: &adapters.Request{Op: adapters.OpRealtime, Model: "m", Stream: true}, Price: price}
	s := e.NewRealtimeSession(x)
	ad, err := g.Admit(time.Now(), billing.Ask{User: id.User, Token: id.Token, Slot: true, Reserve: billing.Reserve(e.RealtimeReservation(price, 0))})
	if err != nil {
		t.Fatalf("admitting the session: %v", err)
	}
	s.ticket, x.Slot = ad.Ticket, ad.Slot
	s.pending = []billing.Hold{ad.Hold}
	return s, rs
}

func reserved(s *RealtimeSession) int64 { return s.e.Gate.Ledger.Reserved() }

// Each response holds a reservation of its own while it runs, the session
// always holds one for the next, a response.create beyond that reserves
// before it is relayed, and Finish gives back every reservation left: what
// the user is charged is what the response.done reported.
func TestRealtimeReservationsFollowResponses(t *testing.T) {
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000, MaxOutput: 100}
	s, rs := realtimeSession(t, 1_000_000_000, price)
	one := s.e.RealtimeReservation(price, 0)
	if got := reserved(s); got != one {
		t.Fatalf("after admission %d reserved, want one response's %d", got, one)
	}
	// the first response.create finds the admission's reservation waiting
	if e := s.askResponse(adapters.RealtimeClientEvent{CreatesResponse: true}); e != nil {
		t.Fatal(e)
	}
	if got := reserved(s); got != one {
		t.Fatalf("a covered response.create reserved again: %d", got)
	}
	// a second one, while the first has not started, reserves its own
	if e := s.askResponse(adapters.RealtimeClientEvent{CreatesResponse: true}); e != nil {
		t.Fatal(e)
	}
	if got := reserved(s); got != 2*one {
		t.Fatalf("two response.create hold %d, want %d", got, 2*one)
	}
	if !s.started("r1", true) || !s.started("r2", true) {
		t.Fatal("a started response found no reservation")
	}
	// both took a waiting reservation, and the next one is reserved
	if got, n := reserved(s), len(s.pending); got != 3*one || n != 1 {
		t.Fatalf("two responses under way: %d reserved, %d waiting; want %d and 1", got, n, 3*one)
	}
	u := adapters.Usage{PromptTokens: 500, CompletionTokens: 50, AudioPromptTokens: 500, AudioCompletionTokens: 50}
	if e := s.settleResponse("r1", u); e != nil {
		t.Fatal(e)
	}
	// the conversation has grown to 550 tokens: the waiting reservation
	// follows it
	grown := s.e.RealtimeReservation(price, 550)
	if grown <= one || s.pending[0].Amount != grown {
		t.Fatalf("the waiting reservation is %d, want %d (the conversation's 550 tokens)", s.pending[0].Amount, grown)
	}
	if e := s.settleResponse("r2", adapters.Usage{PromptTokens: 10, CompletionTokens: 5}); e != nil {
		t.Fatal(e)
	}
	s.Finish()
	if got := reserved(s); got != 0 {
		t.Fatalf("%d units still reserved after the session", got)
	}
	if len(rs.admitted)+len(rs.unadmitted) != 2 {
		t.Fatalf("rows %d+%d, want one per response", len(rs.admitted), len(rs.unadmitted))
	}
	want := price.Cost(u) + price.Cost(adapters.Usage{PromptTokens: 10, CompletionTokens: 5})
	if avail, _ := s.e.Gate.Ledger.Available(1); avail != 1_000_000_000-want {
		t.Fatalf("available %d, want %d", avail, 1_000_000_000-want)
	}
}

// A quota that covers the running response but not the next ends the
// session with insufficient_quota once the response is billed, and a
// response.create beyond the waiting reservation is refused.
func TestRealtimeQuotaRunsOut(t *testing.T) {
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000, MaxOutput: 100}
	probe := (&Engine{DefaultMaxTokens: 4096}).RealtimeReservation(price, 0)
	s, _ := realtimeSession(t, probe+probe/2, price)
	if e := s.askResponse(adapters.RealtimeClientEvent{CreatesResponse: true}); e != nil {
		t.Fatal(e)
	}
	if e := s.askResponse(adapters.RealtimeClientEvent{CreatesResponse: true}); e == nil || e.Code != "insufficient_quota" {
		t.Fatalf("a second response.create the quota cannot cover: %v", e)
	}
	s.started("r1", true)
	e := s.settleResponse("r1", adapters.Usage{PromptTokens: 100, CompletionTokens: 100, AudioPromptTokens: 100, AudioCompletionTokens: 100})
	if e == nil || e.Code != "insufficient_quota" || e.Status != 429 {
		t.Fatalf("after the quota ran out: %v, want insufficient_quota", e)
	}
	s.Finish()
	if got := reserved(s); got != 0 {
		t.Fatalf("%d units still reserved after the session", got)
	}
}

// Transcribed audio is reserved a block at a time and billed per block,
// the last one when the session finishes.
func TestRealtimeTranscriptionBlocks(t *testing.T) {
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000, MaxOutput: 100, AudioSecond: 100}
	s, rs := realtimeSession(t, 1_000_000_000, price)
	for range 3 {
		if e := s.transcribe(20_000); e != nil {
			t.Fatal(e)
		}
	}
	if s.rows != 0 {
		t.Fatalf("a block of %d ms billed before it was full", s.txMillis)
	}
	if e := s.transcribe(1_000); e != nil { // beyond the block: the full one is billed
		t.Fatal(e)
	}
	if s.rows != 1 {
		t.Fatalf("%d rows after the first block filled, want 1", s.rows)
	}
	s.Finish()
	if s.rows != 2 || len(rs.admitted)+len(rs.unadmitted) != 2 {
		t.Fatalf("%d rows after the session, want two blocks", s.rows)
	}
	if got := reserved(s); got != 0 {
		t.Fatalf("%d units still reserved after the session", got)
	}
	want := price.AudioCost(60_000) + price.AudioCost(1_000)
	if avail, _ := s.e.Gate.Ledger.Available(1); avail != 1_000_000_000-want {
		t.Fatalf("available %d, want %d charged for 61 s of audio", avail, want)
	}
}

// What the client adds to the conversation raises the reservation waiting
// for the next response before it is relayed (refused when the quota
// cannot cover it); a response that read the conversation takes what was
// added before it started off the count once its usage reports it; an
// out-of-band response reserves for its own input, an item_reference for
// the whole session.
func TestRealtimeReservationsFollowInput(t *testing.T) {
	audioIn, audioOut := int64(4_000_000), int64(8_000_000)
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000, AudioInput: &audioIn, AudioOutput: &audioOut, MaxOutput: 100}
	s, _ := realtimeSession(t, 1_000_000_000, price)
	floor := s.e.RealtimeReservation(price, 0)
	big := adapters.RealtimeInput{Text: 5000}
	if e := s.addInput(big); e != nil {
		t.Fatal(e)
	}
	want := s.e.RealtimeInputReservation(price, 0, big)
	if want <= floor || s.pending[0].Amount != want {
		t.Fatalf("after 5000 text tokens the waiting reservation is %d, want %d (floor %d)", s.pending[0].Amount, want, floor)
	}
	// an out-of-band response naming the session's items reserves for them
	ref := adapters.RealtimeClientEvent{CreatesResponse: true, OwnInput: true, References: 1}
	if got := s.responseNeed(ref); got != want {
		t.Errorf("an item_reference reserves %d, want the session's %d", got, want)
	}
	own := adapters.RealtimeClientEvent{CreatesResponse: true, OwnInput: true, Reads: adapters.RealtimeInput{Audio: 10}}
	if got := s.responseNeed(own); got != floor {
		t.Errorf("an out-of-band response with 10 audio tokens of its own reserves %d, want the floor %d", got, floor)
	}
	if e := s.askResponse(adapters.RealtimeClientEvent{CreatesResponse: true}); e != nil {
		t.Fatal(e)
	}
	s.started("r1", true)
	s.addInput(adapters.RealtimeInput{Audio: 7}) // after it started: the next one reads it
	if e := s.settleResponse("r1", adapters.Usage{PromptTokens: 5000, CompletionTokens: 10}); e != nil {
		t.Fatal(e)
	}
	if s.added != (adapters.RealtimeInput{Audio: 7}) || s.seen != (adapters.RealtimeInput{Text: 5000, Audio: 17}) {
		t.Errorf("added %+v seen %+v", s.added, s.seen)
	}
	// a quota that cannot cover what an event adds refuses it
	poor, _ := realtimeSession(t, floor+floor/2, price)
	if e := poor.addInput(big); e == nil || e.Code != "insufficient_quota" {
		t.Fatalf("5000 tokens the quota cannot cover: %v", e)
	}
	if poor.added != (adapters.RealtimeInput{}) {
		t.Errorf("a refused event was counted: %+v", poor.added)
	}
	s.Finish()
	poor.Finish()
}
