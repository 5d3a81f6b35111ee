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

// reserveResponse reserves one response's worth.
func (s *RealtimeSession) reserveResponse() (billing.Hold, int64, bool) {
	x := s.first
	amount := s.e.RealtimeReservation(x.Price, s.context)
	ad, err := s.e.Gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount)})
	return ad.Hold, amount, err == nil
}

// askResponse reserves for a client's response.create before it is
// relayed, unless a reservation is already waiting for it.
func (s *RealtimeSession) askResponse() *adapters.Error {
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
	if len(s.pending) <= s.asked {
		hold, amount, ok := s.reserveResponse()
		if !ok {
			return QuotaError("your quota does not cover another Realtime response alongside those under way (each reserves up to " +
				FormatUnits(amount) + "), so the gateway did not relay this response.create: wait for a response to finish, or top up your account")
		}
		s.pending = append(s.pending, hold)
	}
	s.asked++
	return nil
}

// started gives a response that began upstream a waiting reservation, and
// reserves the next response's; false when nothing covers it.
func (s *RealtimeSession) started(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.newRow()
	s.active[id] = x
	s.asked = max(s.asked-1, 0)
	covered := len(s.pending) > 0
	if covered {
		x.Hold, s.pending = s.pending[0], s.pending[1:]
	} else if hold, _, ok := s.reserveResponse(); ok {
		x.Hold, covered = hold, true
	}
	if len(s.pending) == 0 {
		// a response the upstream starts by itself finds this one; if the
		// quota does not cover it now, the next response.done says so
		if hold, _, ok := s.reserveResponse(); ok {
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
	hold, amount, ok := s.reserveResponse()
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
	x := s.first
	amount := s.e.RealtimeReservation(x.Price, s.context)
	for i, h := range s.pending {
		if h.Amount >= amount {
			continue
		}
		more, err := s.e.Gate.Admit(time.Now(), billing.Ask{User: x.ID.User, Token: x.ID.Token, Rate: billing.RateNone, Reserve: billing.Reserve(amount - h.Amount)})
		if err != nil {
			return QuotaError("your quota does not cover the next Realtime response of this conversation (it reads the " +
				strconv.FormatInt(s.context, 10) + " tokens so far again, and reserves up to " + FormatUnits(amount) +
				"), so the gateway ended the session: top up your account and reconnect, or start a shorter conversation")
		}
		s.pending[i].Amount += more.Hold.Amount
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
