package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-model-gateway/gateway/routing"
)

type fakeWriter struct {
	depth, capacity int
	since           time.Time
	failing         bool
}

func (f fakeWriter) QueueDepth() int                 { return f.depth }
func (f fakeWriter) QueueCap() int                   { return f.capacity }
func (f fakeWriter) FailingSince() (time.Time, bool) { return f.since, f.failing }

func TestReady(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	failed := &StoreProbe{}
	failed.Probe(context.Background(), func(context.Context) error { return errors.New("disk I/O error at /data/gateway.db") }, zap.NewNop())
	cases := []struct {
		name   string
		store  *StoreProbe
		writer fakeWriter
		status string
		errs   []string
	}{
		{name: "ok", store: &StoreProbe{}, writer: fakeWriter{depth: 3, capacity: 10}, status: "ok"},
		{name: "store fails", store: failed, writer: fakeWriter{capacity: 10}, status: "unavailable", errs: []string{"the store does not take writes"}},
		{name: "writer fails", store: &StoreProbe{}, writer: fakeWriter{capacity: 10, since: since, failing: true}, status: "unavailable",
			errs: []string{"usage rows cannot be committed"}},
		{name: "queue full", store: &StoreProbe{}, writer: fakeWriter{depth: 10, capacity: 10}, status: "unavailable", errs: []string{"the usage queue is full"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd := Ready(c.store, c.writer, nil)
			if rd.Status != c.status {
				t.Fatalf("status %q, want %q", rd.Status, c.status)
			}
			w := httptest.NewRecorder()
			if err := WriteReady(w, rd); err != nil {
				t.Fatal(err)
			}
			want := http.StatusOK
			if c.status != "ok" {
				want = http.StatusServiceUnavailable
			}
			if w.Code != want || w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("answered %d %v", w.Code, w.Header())
			}
			body := w.Body.String()
			for _, e := range c.errs {
				if !strings.Contains(body, e) {
					t.Errorf("body %s lacks %q", body, e)
				}
			}
			if strings.Contains(body, "/data/") || !strings.Contains(body, `"channels":[]`) {
				t.Errorf("body %s", body)
			}
			if c.writer.failing && rd.UsageWriter.FailingSince.Location() != time.UTC {
				t.Errorf("failing_since %v, want UTC", rd.UsageWriter.FailingSince)
			}
		})
	}
}

// Each channel is named with its failures in a row, in the order given.
func TestReadyChannels(t *testing.T) {
	a, b := &routing.Channel{Name: "a", Type: "openai"}, &routing.Channel{Name: "b", Type: "anthropic"}
	b.Failed(routing.DefaultHealthPolicy, time.Now(), 0)
	b.Failed(routing.DefaultHealthPolicy, time.Now(), 0)
	rd := Ready(&StoreProbe{}, fakeWriter{capacity: 1}, []*routing.Channel{a, b})
	body, _ := json.Marshal(rd.Channels)
	if want := `[{"name":"a","type":"openai","consecutive_failures":0},{"name":"b","type":"anthropic","consecutive_failures":2}]`; string(body) != want {
		t.Fatalf("channels %s, want %s", body, want)
	}
}

// The probe logs the cause once when the store stops taking writes and
// once when it takes them again; a probe cut by closing down is no verdict.
func TestStoreProbe(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	p := &StoreProbe{}
	if s := p.State(); !s.OK || !s.CheckedAt.IsZero() {
		t.Fatalf("before any probe: %+v", s)
	}
	fail := func(context.Context) error { return errors.New("read-only file system") }
	ok := func(context.Context) error { return nil }
	p.Probe(context.Background(), fail, log)
	p.Probe(context.Background(), fail, log)
	if s := p.State(); s.OK || s.CheckedAt.IsZero() || s.Error == "" || strings.Contains(s.Error, "read-only") {
		t.Fatalf("after failures: %+v", s)
	}
	closed, cancel := context.WithCancel(context.Background())
	cancel()
	p.Probe(closed, ok, log)
	if p.State().OK {
		t.Fatal("a probe cut by closing down counted")
	}
	p.Probe(context.Background(), ok, log)
	if !p.State().OK {
		t.Fatal("not OK after a good probe")
	}
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "does not take writes") || !strings.Contains(msgs[1], "takes writes again") {
		t.Fatalf("logged %q", msgs)
	}
}

func TestWriteLive(t *testing.T) {
	w := httptest.NewRecorder()
	if err := WriteLive(w); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || w.Body.String() != "{\"status\":\"ok\"}\n" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("answered %d %q %v", w.Code, w.Body.String(), w.Header())
	}
}
