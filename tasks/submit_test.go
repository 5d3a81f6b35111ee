package tasks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// httpVendor is a task family that submits through the doer it is given,
// to a test server, and reads the server's status as the vendor's error.
type httpVendor struct {
	fakeVendor
	url string
}

func (v *httpVendor) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, v.url, strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	resp, err := do.Do(hr)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", &adapters.Error{Status: resp.StatusCode, Type: adapters.ErrAPI, Message: "vendor says no"}
	}
	return "job-" + up.Channel, nil
}

type observed struct{ channels []string }

func (o *observed) ChannelFailed(channel string, status int, failover bool) {
	o.channels = append(o.channels, channel)
}

// TestSubmitHonoursRetryAfter: a channel whose vendor answers 429 with
// Retry-After is set aside for that long, the failure reaches the metrics
// observer, and the task goes to the next channel.
func TestSubmitHonoursRetryAfter(t *testing.T) {
	r := newRig(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	eng := r.eng.deps.Engine
	eng.Upstreams.Get("a").Provider = fakeProvider{TaskProvider: &httpVendor{url: srv.URL}}
	obs := &observed{}
	eng.Observer = obs
	task, e := r.submit(t, `{"model":"video","prompt":"a cat"}`)
	if e != nil || task.Channel != "b" {
		t.Fatalf("task %+v, error %v", task, e)
	}
	if len(obs.channels) != 1 || obs.channels[0] != "a" {
		t.Fatalf("observed failures %v, want channel a's", obs.channels)
	}
	if st := eng.Channels.Channel("a").State(time.Now()); !st.Ejected || time.Until(st.EjectedUntil) < 100*time.Second {
		t.Fatalf("channel a after a 429 with Retry-After 120: %+v", st)
	}
}

// TestSubmitAdmitsThroughTheGate: a key at its max_parallel is refused
// with 429 and Retry-After, and a reservation the quota does not cover
// is refused in the task's words; each refusal gets its usage row.
func TestSubmitAdmitsThroughTheGate(t *testing.T) {
	r := newRig(t)
	r.id.Token.Limits = store.Limits{MaxParallel: 1}
	eng := r.eng.deps.Engine
	ad, err := eng.Gate.Admit(time.Now(), billing.Ask{User: r.id.User, Token: r.id.Token, Rate: billing.RateRequest})
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{}
	sub, _ := ParseSubmission([]byte(`{"model":"video","prompt":"a cat"}`))
	_, e := r.eng.Submit(context.Background(), SubmitRequest{Identity: r.id, Submission: sub, Start: time.Now(), Header: hdr})
	if e == nil || e.Status != http.StatusTooManyRequests || e.Code != "rate_limit_exceeded" || hdr.Get("Retry-After") == "" {
		t.Fatalf("over max_parallel: %v, Retry-After %q", e, hdr.Get("Retry-After"))
	}
	eng.Gate.Settle(time.Now(), ad, 0, 0)

	r.id.Token.Limits = store.Limits{}
	r.id.User.Quota = 100
	_, e = r.submit(t, `{"model":"video","prompt":"a cat","duration":8}`)
	if e == nil || e.Code != "insufficient_quota" || !strings.Contains(e.Message, "ask for a shorter duration") {
		t.Fatalf("over quota: %v", e)
	}
	if len(r.usage.rows) != 2 {
		t.Fatalf("usage rows %+v, want one per refusal", r.usage.rows)
	}
}

// TestSubmitClassifiesAsTheRelay: the request engine's one classifier
// decides for task submits too: a vendor's 402 or 404 is the channel's
// (its bill, its model list), so the next channel takes the task; a 400 is
// the request's, answered at once with the vendor's words.
func TestSubmitClassifiesAsTheRelay(t *testing.T) {
	answering := func(t *testing.T, r *rig, status int) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		r.eng.deps.Engine.Upstreams.Get("a").Provider = fakeProvider{TaskProvider: &httpVendor{url: srv.URL}}
	}
	for _, status := range []int{http.StatusPaymentRequired, http.StatusNotFound} {
		r := newRig(t)
		answering(t, r, status)
		if task, e := r.submit(t, `{"model":"video","prompt":"a cat"}`); e != nil || task.Channel != "b" {
			t.Fatalf("after a %d: task %+v, error %v", status, task, e)
		}
	}
	r := newRig(t)
	answering(t, r, http.StatusBadRequest)
	if _, e := r.submit(t, `{"model":"video","prompt":"a cat"}`); e == nil || e.Status != http.StatusBadRequest ||
		!strings.Contains(e.Message, "vendor says no") || r.b.submits != 0 {
		t.Fatalf("a refusal: %v, b tried %d times", e, r.b.submits)
	}
}
