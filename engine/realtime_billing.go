package engine

import (
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// transcriptionBlock is how much transcribed audio one reservation covers:
// a usage row a minute of speech, not one per audio frame.
const transcriptionBlock = 60_000 // milliseconds

// activeIDs are the responses under way.
func (s *RealtimeSession) activeIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.active))
	for id := range s.active {
		ids = append(ids, id)
	}
	return ids
}

// reserve holds amount for a response.
func (s *RealtimeSession) reserve(amount int64) (billing.Hold, bool) {
	x := s.first
	ad, err := s.e.Gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount)})
	return ad.Hold, err == nil
}

// nextNeed is what the next response that reads the conversation may
// cost: the conversation so far and what was added since. Called with mu
// held.
func (s *RealtimeSession) nextNeed() int64 {
	return s.e.RealtimeInputReservation(s.first.Price, s.context, s.added)
}

// responseNeed is what the response a response.create asks for may cost:
// its own input (an item_reference may name any of the session's
// content) or the conversation, and its instructions and tools. Called
// with mu held.
func (s *RealtimeSession) responseNeed(ev adapters.RealtimeClientEvent) int64 {
	if !ev.OwnInput {
		return s.e.RealtimeInputReservation(s.first.Price, s.context, sumInput(s.added, ev.Reads))
	}
	in := ev.Reads
	if ev.References > 0 {
		in = sumInput(in, s.seen)
	}
	return s.e.RealtimeInputReservation(s.first.Price, 0, in)
}

// sumInput is a+b.
func sumInput(a, b adapters.RealtimeInput) adapters.RealtimeInput {
	return adapters.RealtimeInput{Text: a.Text + b.Text, Audio: a.Audio + b.Audio}
}

// raisePending raises every reservation waiting for a response to amount:
// the responses take them in the order they start, which need not be the
// order they were asked for, so each covers the largest. Called with mu
// held.
func (s *RealtimeSession) raisePending(amount int64) bool {
	x := s.first
	for i, h := range s.pending {
		if h.Amount >= amount {
			continue
		}
		more, err := s.e.Gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount - h.Amount)})
		if err != nil {
			return false
		}
		s.pending[i].Amount += more.Hold.Amount
	}
	return true
}

// addInput reserves for what a client event adds to the conversation,
// before it is relayed: the responses waiting read it. Refused, the event
// is not relayed.
func (s *RealtimeSession) addInput(in adapters.RealtimeInput) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := sumInput(s.added, in)
	amount := s.e.RealtimeInputReservation(s.first.Price, s.context, added)
	if !s.raisePending(amount) {
		return QuotaError("your quota does not cover a Realtime response reading this conversation with what this event adds (it would reserve up to " +
			FormatUnits(amount) + "), so the gateway did not relay it: top up your account, or start a shorter conversation")
	}
	s.added, s.seen = added, sumInput(s.seen, in)
	return nil
}

// askResponse reserves for a client's response.create before it is
// relayed, what it reads included, unless a reservation is already
// waiting for it.
func (s *RealtimeSession) askResponse(ev adapters.RealtimeClientEvent) *adapters.Error {
	// a response.create is a request: it counts toward the key's rpm and
	// waits for its tpm, as any other would (the session holds max_parallel)
	x, now := s.first, time.Now()
	ad, err := s.e.Gate.Admit(now, billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateInSession})
	if err != nil {
		return AdmissionError(err, nil, "")
	}
	ad.Ticket.Done(now, 0) // its tokens count when it ends, on the session's ticket
	s.mu.Lock()
	defer s.mu.Unlock()
	amount := max(s.responseNeed(ev), s.nextNeed())
	refused := QuotaError("your quota does not cover another Realtime response alongside those under way (this one reserves up to " +
		FormatUnits(amount) + ", for what it reads and writes), so the gateway did not relay this response.create: wait for a response to finish, or top up your account")
	if len(s.pending) <= s.asked {
		hold, ok := s.reserve(amount)
		if !ok {
			return refused
		}
		s.pending = append(s.pending, hold)
	}
	if !s.raisePending(amount) {
		return refused
	}
	s.asked++
	return nil
}

// started gives a response that began upstream a waiting reservation, and
// reserves the next response's; false when nothing covers it. One that
// reads the conversation notes what had been added to it.
func (s *RealtimeSession) started(id string, inConversation bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.newRow()
	s.active[id] = x
	if inConversation {
		s.readAt[id] = s.added
	}
	s.asked = max(s.asked-1, 0)
	covered := len(s.pending) > 0
	if covered {
		x.Hold, s.pending = s.pending[0], s.pending[1:]
	} else if hold, ok := s.reserve(s.nextNeed()); ok {
		x.Hold, covered = hold, true
	}
	if len(s.pending) == 0 {
		// a response the upstream starts by itself finds this one; if the
		// quota does not cover it now, the next response.done says so
		if hold, ok := s.reserve(s.nextNeed()); ok {
			s.pending = append(s.pending, hold)
		}
	}
	return covered
}

// newRow is the exchange of one usage row of the session; its hold names
// the user and token, so a cost settles on them even unreserved.
func (s *RealtimeSession) newRow() *Exchange {
	f := s.first
	return &Exchange{W: f.W, R: f.R, Dialect: f.Dialect, ID: f.ID, Start: time.Now(), RequestID: f.RequestID,
		Req: f.Req, Price: f.Price, Channel: f.Channel, UpstreamID: f.UpstreamID,
		Hold: billing.Hold{UserID: f.ID.User.ID, TokenID: f.ID.Token.ID}}
}

// bill settles a row of the session; the first takes the session's usage
// slot. Called with mu held.
func (s *RealtimeSession) bill(x *Exchange) {
	if !s.firstSlotClaimed {
		s.firstSlotClaimed = true
		x.Slot, s.first.Slot = s.first.Slot, false
	} else {
		x.Slot = s.e.Gate.Usage.Admit(true) == nil
	}
	x.Status = http.StatusOK
	s.rows++
	s.e.Settle(x)
}

// settleResponse bills a finished response; it returns the error that
// ends the session when the user cannot afford the next response.
func (s *RealtimeSession) settleResponse(id string, u adapters.Usage) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.active[id]
	if !ok {
		x = s.newRow() // a response whose start was not seen
	}
	delete(s.active, id)
	if at, ok := s.readAt[id]; ok {
		// its usage holds what had been added when it started
		delete(s.readAt, id)
		s.added = adapters.RealtimeInput{Text: max(s.added.Text-at.Text, 0), Audio: max(s.added.Audio-at.Audio, 0)}
	}
	s.seen.Audio += u.CompletionTokens // its output may be named by an item_reference
	x.Usage = u
	s.ticket.Used(time.Now(), u.PromptTokens+u.CompletionTokens)
	s.bill(x)
	select {
	case s.doneCh <- struct{}{}:
	default:
	}
	s.context = max(s.context, u.PromptTokens+u.CompletionTokens)
	if e := s.topUpPending(); e != nil {
		return e
	}
	if len(s.pending) > 0 {
		return nil
	}
	amount := s.nextNeed()
	hold, ok := s.reserve(amount)
	if !ok {
		return QuotaError("your quota does not cover another Realtime response (each reserves up to " + FormatUnits(amount) +
			"), so the gateway ended the session: top up your account and reconnect")
	}
	s.pending = append(s.pending, hold)
	return nil
}

// topUpPending raises the reservations waiting for the next responses to
// what the conversation has grown to, so a long conversation's input is
// reserved before it is read again. Called with mu held.
func (s *RealtimeSession) topUpPending() *adapters.Error {
	amount := s.nextNeed()
	if !s.raisePending(amount) {
		return QuotaError("your quota does not cover the next Realtime response of this conversation (it reads the " +
			strconv.FormatInt(s.context+s.added.Text+s.added.Audio, 10) + " tokens so far again, and reserves up to " + FormatUnits(amount) +
			"), so the gateway ended the session: top up your account and reconnect, or start a shorter conversation")
	}
	return nil
}

// transcribe reserves for millis of audio the upstream will transcribe,
// billing the block under way when it is full.
func (s *RealtimeSession) transcribe(millis int64) *adapters.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transcribing != nil && s.txMillis+millis > s.txCap {
		s.billTranscription()
	}
	if s.transcribing == nil {
		x := s.newRow()
		x.Req = &adapters.Request{Op: adapters.OpRealtime, Dialect: x.Req.Dialect, Model: x.Req.Model, Stream: true, Media: &adapters.MediaRequest{}}
		x.Media = &Media{}
		capMillis := max(int64(transcriptionBlock), millis)
		amount := x.Price.AudioCost(capMillis)
		ad, err := s.e.Gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount)})
		if err != nil {
			return QuotaError("your quota does not cover transcribing more of this session's audio (each minute reserves " + FormatUnits(amount) +
				"), so the gateway ended the session: top up your account and reconnect")
		}
		x.Hold = ad.Hold
		s.transcribing, s.txMillis, s.txCap = x, 0, capMillis
	}
	s.txMillis += millis
	return nil
}

// billTranscription bills the block of transcribed audio under way for the
// audio it covered. Called with mu held.
func (s *RealtimeSession) billTranscription() {
	x := s.transcribing
	if x == nil {
		return
	}
	s.transcribing = nil
	x.Media.Usage = adapters.MediaUsage{AudioMillis: s.txMillis, AudioKnown: true}
	s.bill(x)
}

// Finish settles what the session still holds: the transcribed audio is
// billed, the reservations of responses that never started or never
// finished are released (and the session's own row written, when nothing
// was billed), and the rate limits are let go.
func (s *RealtimeSession) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticket.Done(time.Now(), 0) // its responses' tokens were counted as they ended
	s.billTranscription()
	ledger := s.e.Gate.Ledger
	for _, hold := range s.pending {
		ledger.Settle(hold, 0)
	}
	for _, x := range s.active {
		ledger.Settle(x.Hold, 0)
	}
	s.pending, s.active = nil, nil
	if s.rows == 0 {
		if s.status >= 400 {
			s.first.Status, s.first.ErrMsg = s.status, s.errMsg
		}
		s.e.Settle(s.first) // the session's row, a refusal's too
		return
	}
	// its rows are the responses' and the transcriptions'; why it ended
	// goes to the log
	if s.status >= 400 {
		s.e.Log.Warn("realtime session ended", zap.String("channel", s.ch.Name), zap.Int("rows", s.rows),
			zap.Int("status", s.status), zap.String("reason", s.errMsg))
	}
}
