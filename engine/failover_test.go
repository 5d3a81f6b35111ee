package engine

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

type failedCall struct {
	channel  string
	status   int
	failover bool
}

type recorder struct{ calls []failedCall }

func (r *recorder) ChannelFailed(channel string, status int, failover bool) {
	r.calls = append(r.calls, failedCall{channel, status, failover})
}

// newEngine serves model "m" from channels a, b, c in that order.
func newEngine(maxAttempts int) (*Engine, *recorder) {
	var chans []*routing.Channel
	for i, n := range []string{"a", "b", "c"} {
		chans = append(chans, &routing.Channel{Name: n, Type: "t", Keys: []string{"key-" + n + "-12345678"}, Models: []string{"m"}, Priority: 10 - i})
	}
	rec := &recorder{}
	return &Engine{Channels: routing.NewSet(chans), MaxAttempts: maxAttempts, Health: routing.DefaultHealthPolicy,
		FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop(), Observer: rec}, rec
}

// script answers each channel's attempt with the failure given for it.
func script(tried *[]string, fails map[string]*Failure) Attempter {
	return AttemptFunc(func(ch *routing.Channel) *Failure {
		*tried = append(*tried, ch.Name)
		return fails[ch.Name]
	})
}

func outage() *Failure {
	return &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "down")}
}

func TestRunFailsOverToTheNextChannel(t *testing.T) {
	e, rec := newEngine(3)
	var tried []string
	ch, f := e.Run(context.Background(), "m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": outage()}))
	if f != nil || ch == nil || ch.Name != "b" {
		t.Fatalf("got %v %v, want channel b", ch, f)
	}
	if len(tried) != 2 || len(rec.calls) != 1 || rec.calls[0] != (failedCall{"a", http.StatusBadGateway, true}) {
		t.Fatalf("tried %v, observed %v", tried, rec.calls)
	}
	if s := ch.State(time.Now()); s.ConsecutiveFailures != 0 {
		t.Errorf("the answering channel keeps %d failures", s.ConsecutiveFailures)
	}
}

func TestRunStopsOnTheRequestsOwnFault(t *testing.T) {
	e, rec := newEngine(3)
	var tried []string
	bad := &Failure{Err: adapters.BadRequest("no")}
	_, f := e.Run(context.Background(), "m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": bad}))
	if f != bad || len(tried) != 1 || len(rec.calls) != 0 {
		t.Fatalf("got %v after %v, observed %v", f, tried, rec.calls)
	}
}

func TestRunCountsNoFailoverOnTheLastChannel(t *testing.T) {
	e, rec := newEngine(2)
	var tried []string
	_, f := e.Run(context.Background(), "m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": outage(), "b": outage(), "c": outage()}))
	if f == nil || len(tried) != 2 {
		t.Fatalf("the retry budget of 2 tried %v", tried)
	}
	want := []failedCall{{"a", 502, true}, {"b", 502, false}}
	if len(rec.calls) != 2 || rec.calls[0] != want[0] || rec.calls[1] != want[1] {
		t.Fatalf("observed %v, want %v", rec.calls, want)
	}
}

func TestRunStopsWhenTheClientHasGone(t *testing.T) {
	e, _ := newEngine(3)
	ctx, cancel := context.WithCancel(context.Background())
	var tried []string
	try := AttemptFunc(func(ch *routing.Channel) *Failure {
		tried = append(tried, ch.Name)
		cancel()
		return outage()
	})
	_, f := e.Run(ctx, "m", e.Plan("m", nil), try)
	if f == nil || f.Err.Status != adapters.StatusClientClosed || len(tried) != 1 {
		t.Fatalf("got %v after %v", f, tried)
	}
}

// TestRunDetachedOutlivesTheClient: a detached run (a task submit) fails
// over to the end of its plan though its client has gone.
func TestRunDetachedOutlivesTheClient(t *testing.T) {
	e, rec := newEngine(3)
	var tried []string
	ch, f := e.RunDetached("m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": outage(), "b": outage()}))
	if f != nil || ch == nil || ch.Name != "c" || len(tried) != 3 || len(rec.calls) != 2 {
		t.Fatalf("got %v %v after %v, observed %v", ch, f, tried, rec.calls)
	}
}

func TestRunHonoursRetryAfter(t *testing.T) {
	e, _ := newEngine(3)
	var tried []string
	limited := Classify("a", nil, &adapters.Error{Status: http.StatusTooManyRequests}, http.Header{"Retry-After": {"60"}})
	_, f := e.Run(context.Background(), "m", e.Plan("m", nil), script(&tried, map[string]*Failure{"a": limited}))
	if f != nil {
		t.Fatal(f.Err)
	}
	if !e.Channels.Channel("a").Ejected(time.Now().Add(50 * time.Second)) {
		t.Error("a channel that answered 429 with Retry-After: 60 is not set aside for it")
	}
	for range 5 {
		if p := e.Plan("m", nil); p[0].Name == "a" {
			t.Fatal("the plan still starts with the ejected channel")
		}
	}
}

func TestRunWithNoChannel(t *testing.T) {
	e, _ := newEngine(3)
	_, f := e.Run(context.Background(), "m", nil, script(new([]string), nil))
	if f == nil || f.Err.Status != http.StatusServiceUnavailable {
		t.Fatalf("got %v", f)
	}
}

func TestPlanKeepsBeforeTheBudget(t *testing.T) {
	e, _ := newEngine(1)
	p := e.Plan("m", func(ch *routing.Channel) bool { return ch.Name == "c" })
	if len(p) != 1 || p[0].Name != "c" {
		t.Fatalf("plan %v: a channel that cannot serve the request spent the budget", p)
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		status  int
		fault   adapters.Fault
		channel bool
		client  int
	}{
		{http.StatusUnauthorized, 0, true, 502},
		{http.StatusPaymentRequired, 0, true, 502},
		{http.StatusNotFound, 0, true, 502},
		{http.StatusFound, 0, true, 502},
		{http.StatusTooManyRequests, 0, true, 429},
		{http.StatusRequestTimeout, 0, true, 504},
		{529, 0, true, 503},
		{http.StatusInternalServerError, 0, true, 502},
		{http.StatusBadRequest, 0, false, 400},
		{http.StatusBadRequest, adapters.FaultChannel, true, 502},
		{http.StatusUnprocessableEntity, 0, false, 422},
		{http.StatusConflict, 0, false, 409},
	} {
		f := Classify("ch", []string{"sk-secret-12345678"}, &adapters.Error{Status: tt.status, Fault: tt.fault, Message: "with sk-secret-12345678"}, nil)
		if f.Channel != tt.channel || f.Err.Status != tt.client {
			t.Errorf("HTTP %d (fault %d): channel %v, client status %d; want %v, %d", tt.status, tt.fault, f.Channel, f.Err.Status, tt.channel, tt.client)
		}
		if f.Err.Message != MaskKeys(f.Err.Message, []string{"sk-secret-12345678"}) {
			t.Errorf("HTTP %d: the client's message shows the key: %s", tt.status, f.Err.Message)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "7": 7 * time.Second, "999999": 24 * time.Hour, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
	} {
		if got := RetryAfter(http.Header{"Retry-After": {v}}, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// TestRemovedChannelFailsOver: a channel made at runtime and removed (or
// changed) between a request's plan and its attempt has no upstream
// record: the attempt is the channel's failure, so the next one is tried,
// rather than a panic on a missing record.
func TestRemovedChannelFailsOver(t *testing.T) {
	e, _ := newEngine(3)
	e.Upstreams = NewUpstreamTable(map[string]*Upstream{})
	plan := e.Plan("m", nil)
	x := &Exchange{R: (&http.Request{}).WithContext(context.Background()), Req: &adapters.Request{Op: adapters.OpChat, Model: "m"}}
	f := (&relayAttempt{e: e, x: x}).Try(plan[0])
	if f == nil || !f.Channel || f.Err.Status != http.StatusServiceUnavailable {
		t.Fatalf("an attempt on a removed channel: %+v", f)
	}
}
