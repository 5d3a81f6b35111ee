package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// textStep reads a stream of "data: <word>" events, one "data: usage"
// reporting 3 prompt and 4 completion tokens, ended by data: [DONE] (an
// end marker, as OpenAI's) or by "data: stop" (a last event relayed, as
// Anthropic's message_stop).
type textStep struct{}

func (textStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	switch d := string(ev.Data); d {
	case "[DONE]":
		return out, adapters.StreamEndMarker, nil
	case "stop":
		return append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Text: d}), adapters.StreamEnds, nil
	case "usage":
		return append(out, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &adapters.Usage{PromptTokens: 3, CompletionTokens: 4}}), adapters.StreamGoesOn, nil
	default:
		return append(out, &adapters.StreamEvent{Type: adapters.EventTextDelta, Text: d}), adapters.StreamGoesOn, nil
	}
}

func (textStep) Probe(*adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	return nil, adapters.StreamGoesOn, nil
}

func (textStep) DeltaText(data []byte) string { return string(data) }

// lineDialect writes each text event as a line and "END" as the closing
// event.
type lineDialect struct{ adapters.Dialect }

func (lineDialect) NewStreamEncoder(*adapters.Request) adapters.StreamEncoder { return lineEncoder{} }

type lineEncoder struct{}

func (lineEncoder) ContentType() string { return "text/plain" }
func (lineEncoder) Encode(dst []byte, ev *adapters.StreamEvent) []byte {
	if ev.Type != adapters.EventTextDelta {
		return dst
	}
	return append(append(dst, ev.Text...), '\n')
}
func (lineEncoder) Finish(dst []byte) []byte { return append(dst, "END\n"...) }
func (lineEncoder) Error(dst []byte, e *adapters.Error) []byte {
	return append(dst, "ERROR "+e.Message+"\n"...)
}

// closingWatch notes how many rows were written by each write.
type closingWatch struct {
	*httptest.ResponseRecorder
	rows    *rows
	rowsAt  []int
	written []string
}

func (w *closingWatch) Write(b []byte) (int, error) {
	w.rowsAt = append(w.rowsAt, len(w.rows.admitted))
	w.written = append(w.written, string(b))
	return w.ResponseRecorder.Write(b)
}

// A stream's row is written, and its charge and window hold settled,
// before its closing event goes out: the SDKs stop reading there, and a
// client's next request (or a kill -9) may come before the handler
// returns.
func TestStreamSettledBeforeItsClosingEvent(t *testing.T) {
	for _, c := range []struct{ name, body, answer string }{
		{"end marker", "data: hello\n\ndata: world\n\ndata: usage\n\ndata: [DONE]\n\n", "hello\nworld\nEND\n"},
		{"last event relayed", "data: hello\n\ndata: usage\n\ndata: world\n\ndata: stop\n\n", "hello\nworld\nstop\nEND\n"},
		// the body ends with no end: the error event ends the stream
		{"cut", "data: hello\n\ndata: usage\n\ndata: world\n\n", "hello\nworld\nERROR the upstream stream broke off before its end (channel \"a\")\n"},
	} {
		t.Run(c.name, func(t *testing.T) { streamSettledBeforeItsEnd(t, c.body, c.answer) })
	}
}

func streamSettledBeforeItsEnd(t *testing.T, body, answer string) {
	rs := &rows{}
	g := &billing.Gate{Limiter: billing.NewLimiter(), Ledger: billing.NewLedger(), Usage: queue{}}
	e := &Engine{Gate: g, Rows: rs, Meter: &meter{}, Health: routing.DefaultHealthPolicy, FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop()}
	id := &keys.Identity{User: &store.User{ID: 1, Quota: 1_000_000}, Token: &store.Token{ID: 2}}
	budgets := []billing.Budget{{Subject: "key:2", Limits: billing.WindowLimits{billing.Daily: 1_000}}}
	ad, err := g.Admit(time.Now(), billing.Ask{User: id.User, Token: id.Token, Slot: true, Reserve: billing.Reserve(500)})
	if err != nil {
		t.Fatal(err)
	}
	spend := &billing.Spend{}
	if ad.Hold.Windows, err = spend.Hold(context.Background(), time.Now(), time.UTC, budgets, 500); err != nil {
		t.Fatal(err)
	}
	w := &closingWatch{ResponseRecorder: httptest.NewRecorder(), rows: rs}
	x := &Exchange{W: w, R: httptest.NewRequest("POST", "/v1/chat/completions", nil), Dialect: lineDialect{}, ID: id, Start: time.Now(),
		Req: &adapters.Request{Op: adapters.OpChat, Model: "m", Stream: true}, Price: &billing.Price{Input: 1_000_000, Output: 2_000_000},
		Hold: ad.Hold, Ticket: ad.Ticket, Slot: ad.Slot, Settled: true, Channel: "a"}
	upstream := iotest.OneByteReader(strings.NewReader(body))
	dec, first := openLines(t, upstream)
	at := NewStreamAttempt(context.Background(), time.Minute, 0)
	if err := e.relayStream(x, at, &routing.Channel{Name: "a"}, Bounds{}, upstream, dec, first); err != nil {
		t.Fatal(err)
	}
	if got := w.Body.String(); got != answer || w.Code != http.StatusOK || x.Cut != strings.Contains(answer, "ERROR") {
		t.Fatalf("answer %d %q", w.Code, got)
	}
	// what ends the stream for a client (the closing event, the
	// upstream's last one) is written after the row, the rest before
	for i, b := range w.written {
		closing := strings.Contains(b, "stop\n") || strings.Contains(b, "END\n") || strings.Contains(b, "ERROR")
		if closing != (w.rowsAt[i] == 1) {
			t.Fatalf("rows written by each write %v (writes %q)", w.rowsAt, w.written)
		}
	}
	if len(rs.admitted) != 1 {
		t.Fatalf("%d rows", len(rs.admitted))
	}
	if r := rs.admitted[0]; r.PromptTokens != 3 || r.CompletionTokens != 4 || r.Cost != 11 || r.Windows == "" {
		t.Fatalf("row %+v", r)
	}
	st, err := spend.Status(context.Background(), time.Now(), time.UTC, budgets)
	if err != nil || len(st) != 1 || st[0].Spent != 11 {
		t.Fatalf("window after the stream: %+v %v (want 11 spent, nothing held)", st, err)
	}
	// the handler's deferred Settle finds it done
	e.Settle(x)
	if len(rs.admitted) != 1 {
		t.Fatalf("settled twice: %d rows", len(rs.admitted))
	}
}

// openLines starts reading body, a textStep stream, as relayStream's
// caller does: its first event read.
func openLines(t *testing.T, body io.Reader) (*adapters.StreamDecoder, *adapters.StreamEvent) {
	t.Helper()
	dec := adapters.NewStreamDecoder(body, textStep{}, false, "line")
	first, err := dec.Next()
	if err != nil {
		t.Fatal(err)
	}
	return dec, first
}

// lineExchange is an unpriced stream to w in the line dialect.
func lineExchange(w http.ResponseWriter) *Exchange {
	return &Exchange{W: w, R: httptest.NewRequest("POST", "/v1/chat/completions", nil), Dialect: lineDialect{},
		ID: &keys.Identity{User: &store.User{ID: 1}, Token: &store.Token{ID: 2}}, Start: time.Now(),
		Req: &adapters.Request{Op: adapters.OpChat, Model: "m", Stream: true}, Settled: true, Channel: "a"}
}

// unpricedEngine settles without prices or windows.
func unpricedEngine() *Engine {
	return &Engine{Gate: &billing.Gate{Limiter: billing.NewLimiter(), Ledger: billing.NewLedger(), Usage: queue{}}, Rows: &rows{}, Meter: &meter{}}
}

// A stream read to its [DONE] is read on to its body's end (the last
// chunk, sent just after it), so that its upstream connection goes back
// to the pool: the next stream reuses it instead of dialing. The
// upstream here writes the last chunk a little after [DONE], as a
// handler that flushes its last event and then returns does. So too a
// stream its client left, read on for its usage (the drain).
func TestStreamGivesBackItsConnection(t *testing.T) {
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("client gone %v", gone), func(t *testing.T) { streamGivesBackItsConnection(t, gone) })
	}
}

// goneClient is a client that left: every write fails (and is told on
// wrote).
type goneClient struct {
	*httptest.ResponseRecorder
	wrote chan struct{}
}

func (c goneClient) Write([]byte) (int, error) {
	select {
	case c.wrote <- struct{}{}:
	default:
	}
	return 0, errors.New("broken pipe")
}

func streamGivesBackItsConnection(t *testing.T, gone bool) {
	var dials atomic.Int32
	wrote := make(chan struct{}, 1)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: hello\n\n")
		w.(http.Flusher).Flush()
		if gone { // the first event is relayed alone, and found the client gone
			select {
			case <-wrote:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "data: usage\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	client := up.Client()
	e := unpricedEngine()
	e.Drain, e.Log = DrainBounds{Timeout: time.Minute, MaxBytes: 1 << 20}, zap.NewNop()
	for i := range 3 {
		at := NewStreamAttempt(context.Background(), time.Minute, e.Drain.Timeout)
		req, _ := http.NewRequestWithContext(at.Ctx, "POST", up.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		dec, first := openLines(t, resp.Body)
		rec := httptest.NewRecorder()
		var w http.ResponseWriter = rec
		if gone {
			w = goneClient{rec, wrote}
		}
		x := lineExchange(w)
		if err := e.relayStream(x, at, &routing.Channel{Name: "a"}, Bounds{}, resp.Body, dec, first); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want, status := "hello\nEND\n", http.StatusOK
		if gone {
			want, status = "", adapters.StatusClientClosed
		}
		if rec.Body.String() != want || x.Status != status || x.Usage.CompletionTokens != 4 {
			t.Fatalf("stream %d: %d %q, usage %+v", i, x.Status, rec.Body.String(), x.Usage)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("three streams one after another took %d connections, want 1", n)
	}
}

// An upstream that holds its body open after [DONE] (or goes on sending)
// does not hold the stream: the wait for the body's end is bounded, and
// the connection is then given up.
func TestStreamEndsThoughItsBodyDoesNot(t *testing.T) {
	for _, after := range []string{"hold", "chatter"} {
		t.Run(after, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: hello\n\ndata: [DONE]\n\n")
				w.(http.Flusher).Flush()
				for after == "chatter" && r.Context().Err() == nil {
					if _, err := io.WriteString(w, ": more\n\n"); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
				<-r.Context().Done()
			}))
			defer up.Close()
			e := unpricedEngine()
			at := NewStreamAttempt(context.Background(), time.Minute, 0)
			req, _ := http.NewRequestWithContext(at.Ctx, "POST", up.URL, nil)
			resp, err := up.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			dec, first := openLines(t, resp.Body)
			w := httptest.NewRecorder()
			x := lineExchange(w)
			done := make(chan error, 1)
			go func() { done <- e.relayStream(x, at, &routing.Channel{Name: "a"}, Bounds{}, resp.Body, dec, first) }()
			select {
			case err := <-done:
				if err != nil || w.Body.String() != "hello\nEND\n" || x.Status != http.StatusOK {
					t.Fatalf("%v %d %q", err, x.Status, w.Body.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stream waited on for its body's end")
			}
		})
	}
}
