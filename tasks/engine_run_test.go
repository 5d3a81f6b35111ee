package tasks

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// fakeVendor is a task family whose answers the test sets.
type fakeVendor struct {
	mu        sync.Mutex
	submitErr error
	submits   int
	state     *adapters.TaskState
}

func (v *fakeVendor) CallbackCapable() bool { return false }

// OwnedFields: the fake vendor owns no member of its body.
func (v *fakeVendor) OwnedFields() []string { return nil }

func (v *fakeVendor) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.submits++
	if v.submitErr != nil {
		return "", v.submitErr
	}
	return "job-" + up.Channel, nil
}

func (v *fakeVendor) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := *v.state
	return &st, nil
}

type discardUsage struct{ rows []*store.UsageLog }

func (u *discardUsage) Write(row *store.UsageLog)           { u.rows = append(u.rows, row) }
func (u *discardUsage) WriteUnadmitted(row *store.UsageLog) { u.rows = append(u.rows, row) }

// fakeProvider is a fake vendor as the request engine holds it: a task
// family (the relay half is never called).
type fakeProvider struct {
	adapters.Provider
	adapters.TaskProvider
}

type rig struct {
	eng    *Engine
	st     store.Store
	ledger *billing.Ledger
	usage  *discardUsage
	a, b   *fakeVendor
	id     *keys.Identity
}

func newRig(t *testing.T) *rig {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	u := &store.User{Username: "ada", PasswordHash: "x", Quota: 10_000_000}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{UserID: u.ID, Name: "k", KeyHash: "hash-k", KeyPrefix: "sk-ha"}
	if err := st.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	r := &rig{st: st, ledger: billing.NewLedger(), usage: &discardUsage{}, a: &fakeVendor{}, b: &fakeVendor{},
		id: &keys.Identity{User: u, Token: tok}}
	var chans []*routing.Channel
	upstreams := map[string]*engine.Upstream{}
	for i, name := range []string{"a", "b"} {
		chans = append(chans, &routing.Channel{Name: name, Keys: []string{"key-" + name}, Models: []string{"video"}, Priority: 10 - i})
		upstreams[name] = &engine.Upstream{Provider: fakeProvider{TaskProvider: map[string]*fakeVendor{"a": r.a, "b": r.b}[name]},
			Client: http.DefaultClient, Bounds: engine.Bounds{Timeout: time.Second, MaxResponseBody: 1 << 20}}
	}
	eng := &engine.Engine{Channels: routing.NewSet(chans), Upstreams: engine.NewUpstreamTable(upstreams), MaxAttempts: 3, Health: routing.DefaultHealthPolicy,
		FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop(),
		Prices: engine.NewPriceTable(map[string]*billing.Price{"video": {VideoSecond: 100_000, MaxSeconds: 10}}),
		Gate:   &billing.Gate{Limiter: billing.NewLimiter(), Ledger: r.ledger, Usage: nil}, Rows: r.usage}
	r.eng = New(Config{PollInterval: time.Millisecond}, Deps{Store: st, Engine: eng})
	return r
}

func (r *rig) submit(t *testing.T, body string) (*store.Task, *adapters.Error) {
	t.Helper()
	sub, e := ParseSubmission([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	return r.eng.Submit(context.Background(), SubmitRequest{Identity: r.id, Submission: sub, RequestID: "req-1", Start: time.Now()})
}

func (r *rig) quota(t *testing.T) int64 {
	t.Helper()
	u, err := r.st.UserByID(context.Background(), r.id.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	return u.Quota
}

// TestEngineSubmitFailsOverAndSettles: a channel's failure passes the task
// to the next; the reservation leaves the balance with the task, and a
// finished task is charged its real seconds, the rest refunded once.
func TestEngineSubmitFailsOverAndSettles(t *testing.T) {
	r := newRig(t)
	r.a.submitErr = adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "down")
	task, e := r.submit(t, `{"model":"video","prompt":"a cat","duration":8}`)
	if e != nil {
		t.Fatal(e)
	}
	if task.Channel != "b" || task.UpstreamID != "job-b" || task.Reserved != 800_000 || r.a.submits != 1 || r.b.submits != 1 {
		t.Fatalf("task %+v after submits a=%d b=%d", task, r.a.submits, r.b.submits)
	}
	if q := r.quota(t); q != 10_000_000-800_000 {
		t.Fatalf("quota after submit %d", q)
	}
	// saving the submitted task handed its lease back: a status call a
	// poll interval later polls it
	time.Sleep(5 * time.Millisecond)
	r.b.state = &adapters.TaskState{Status: adapters.TaskFinished, Seconds: 5, Files: []adapters.TaskFile{{URL: "https://v/1.mp4", Type: adapters.FileVideo}}}
	got, ae := r.eng.Status(context.Background(), zap.NewNop(), r.id.User.ID, task.ID)
	if ae != nil {
		t.Fatal(ae)
	}
	if got.Status != adapters.TaskFinished || got.Cost != 500_000 || got.FinishedAt.IsZero() {
		t.Fatalf("after the status refresh: %+v", got)
	}
	if q := r.quota(t); q != 10_000_000-500_000 {
		t.Fatalf("quota after settling %d, want charged 5s", q)
	}
	if files := r.eng.ClientFiles(got, "https://gw"); len(files) != 1 || files[0].URL != "https://v/1.mp4" {
		t.Fatalf("files %+v", files)
	}
	data := StatusData(got, nil)
	if data["status"] != adapters.TaskFinished || data["finished_time"] == nil {
		t.Fatalf("status data %v", data)
	}
	if _, ae := r.eng.Own(context.Background(), zap.NewNop(), r.id.User.ID+1, task.ID); ae == nil || ae.Status != http.StatusNotFound {
		t.Fatalf("another user's task: %v", ae)
	}
}

// TestEngineSubmitRefundsWhenNoChannelTakes: when every channel fails,
// the task is stored failed and its whole reservation comes back.
func TestEngineSubmitRefundsWhenNoChannelTakes(t *testing.T) {
	r := newRig(t)
	r.a.submitErr = adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "down")
	r.b.submitErr = r.a.submitErr
	if _, e := r.submit(t, `{"model":"video","prompt":"a cat"}`); e == nil || e.Status != http.StatusBadGateway {
		t.Fatalf("error %v", e)
	}
	if q := r.quota(t); q != 10_000_000 {
		t.Fatalf("quota %d after a refused task", q)
	}
	// refusals before a task exists get their usage row here
	if _, e := r.submit(t, `{"model":"video","prompt":"p","metadata":{"model":"x"}}`); e == nil || e.Status != http.StatusBadRequest {
		t.Fatalf("owned metadata: %v", e)
	}
	if len(r.usage.rows) != 1 || r.usage.rows[0].Model != "video" || r.usage.rows[0].Status != http.StatusBadRequest {
		t.Fatalf("usage rows %+v", r.usage.rows)
	}
}

// TestEngineUnknownOutcome: a task whose submit lease ran out before the
// vendor answered is failed, charged its reservation, never refunded.
func TestEngineUnknownOutcome(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	task := &store.Task{ID: NewID(), UserID: r.id.User.ID, TokenID: r.id.Token.ID, Model: "video", Reserved: 300_000,
		LeaseOwner: "dead/submit", LeaseUntil: time.Now().Add(-time.Second)}
	if err := r.st.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	r.eng.sweep(ctx)
	r.eng.wg.Wait()
	got, err := r.st.TaskByID(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != adapters.TaskFailed || got.Cost != 300_000 || got.Error != unknownOutcomeError {
		t.Fatalf("task %+v", got)
	}
	if q := r.quota(t); q != 10_000_000-300_000 {
		t.Fatalf("quota %d", q)
	}
}
