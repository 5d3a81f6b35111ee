package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// probeFamily is a chat family whose wire is the neutral request as JSON:
// enough to see what a probe sends and reads.
type probeFamily struct{}

func (probeFamily) Type() string        { return "probe" }
func (probeFamily) WireDialect() string { return "probe" }
func (probeFamily) DecodeError(status int, body []byte) *adapters.Error {
	return adapters.Errorf(status, adapters.ErrAPI, "%s", body)
}
func (probeFamily) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	body, _ := json.Marshal(map[string]any{"model": up.Model, "max_tokens": *req.Chat.MaxTokens, "stream": req.Stream})
	hr, err := adapters.NewJSONRequest(ctx, up.BaseURL+"/chat", body, false)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+up.Key)
	return hr, nil
}
func (probeFamily) DecodeResponse(_ *adapters.Request, body []byte) (*adapters.Response, error) {
	var in struct {
		Text string
		In   int64
		Out  int64
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	return &adapters.Response{Message: adapters.Message{Parts: []adapters.Part{{Type: adapters.PartText, Text: in.Text}}},
		Usage: adapters.Usage{PromptTokens: in.In, CompletionTokens: in.Out}}, nil
}
func (probeFamily) NewStreamStep(*adapters.Request) adapters.StreamStep { return nil }

// noChat is a family that does not chat.
type noChat struct{}

func (noChat) Type() string { return "video" }
func (noChat) DecodeError(status int, _ []byte) *adapters.Error {
	return adapters.Errorf(status, adapters.ErrAPI, "no")
}

func probeEngine(t *testing.T, h http.HandlerFunc, timeout time.Duration) *Engine {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	chans := []*routing.Channel{
		{Name: "main", Type: "probe", BaseURL: srv.URL, Keys: []string{"sk-secret-key-0001"}, Models: []string{"m", "n"}, ModelMap: map[string]string{"alias": "m-upstream"}},
		{Name: "video", Type: "video", BaseURL: srv.URL, Models: []string{"v"}},
	}
	b := Bounds{Timeout: timeout, StreamIdle: time.Second, MaxResponseBody: 1 << 20}
	return &Engine{Channels: routing.NewSet(chans), MaxAttempts: 2, Health: routing.HealthPolicy{ConsecutiveFailures: 1, BaseEjection: time.Minute, MaxEjection: time.Minute},
		FailureLog: &routing.LogThrottle{Interval: time.Second}, Log: zap.NewNop(),
		Upstreams: NewUpstreamTable(map[string]*Upstream{
			"main":  {Provider: probeFamily{}, Client: srv.Client(), Bounds: b},
			"video": {Provider: noChat{}, Client: srv.Client(), Bounds: b},
		})}
}

func TestProbeSendsOneTokenThroughTheChannel(t *testing.T) {
	var got map[string]any
	e := probeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &got)
		if r.Header.Get("Authorization") != "Bearer sk-secret-key-0001" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Request-Id", "up-42")
		_, _ = w.Write([]byte(`{"text":"ok","in":9,"out":1}`))
	}, time.Second)
	res, err := e.Probe(context.Background(), "main", "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Model != "m" || res.Status != 200 || res.Reply != "ok" || res.UpstreamID != "up-42" ||
		res.Usage.PromptTokens != 9 || res.Usage.CompletionTokens != 1 || res.Latency <= 0 {
		t.Fatalf("probe result %+v", res)
	}
	if got["model"] != "m" || got["max_tokens"] != 1.0 || got["stream"] != false {
		t.Fatalf("the upstream was sent %v", got)
	}
	// a mapped name goes upstream as the name it maps to
	if _, err := e.Probe(context.Background(), "main", "alias"); err != nil || got["model"] != "m-upstream" {
		t.Fatalf("probing the alias: %v, sent %v", err, got)
	}
}

func TestProbeReportsAFailureWithoutCountingIt(t *testing.T) {
	e := probeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("broken for sk-secret-key-0001"))
	}, time.Second)
	for range 3 {
		res, err := e.Probe(context.Background(), "main", "n")
		if err != nil {
			t.Fatal(err)
		}
		if res.OK || res.Status != 500 || !strings.Contains(res.Error, `channel "main" failed`) ||
			!strings.Contains(res.Detail, "broken") || strings.Contains(res.Detail, "sk-secret") {
			t.Fatalf("probe result %+v", res)
		}
	}
	if s := e.Channels.Channel("main").State(time.Now()); s.Ejected || s.ConsecutiveFailures != 0 || s.Ejections != 0 {
		t.Fatalf("the probes counted toward health: %+v", s)
	}
}

func TestProbeIsBoundedByTheChannelsTimeout(t *testing.T) {
	release := make(chan struct{})
	e := probeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, 100*time.Millisecond)
	defer close(release)
	start := time.Now()
	res, err := e.Probe(context.Background(), "main", "m")
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || !strings.Contains(res.Error, "within 100ms") || time.Since(start) > 5*time.Second {
		t.Fatalf("after %s: %+v", time.Since(start), res)
	}
}

func TestProbeRefusals(t *testing.T) {
	e := probeEngine(t, func(w http.ResponseWriter, r *http.Request) { t.Error("a refused probe reached the upstream") }, time.Second)
	for _, c := range []struct {
		channel, model string
		status         int
		words          string
	}{
		{"nope", "", http.StatusNotFound, `no channel "nope"`},
		{"main", "x", http.StatusBadRequest, "serves m, n"},
		{"video", "", http.StatusBadRequest, "does not chat"},
	} {
		_, err := e.Probe(context.Background(), c.channel, c.model)
		var ae *adapters.Error
		if !errors.As(err, &ae) || ae.Status != c.status || !strings.Contains(ae.Message, c.words) {
			t.Errorf("probing %s/%s: %v", c.channel, c.model, err)
		}
	}
}
