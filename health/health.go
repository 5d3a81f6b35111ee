// Package health says whether the gateway can bill, for the health
// handler (gateway_health): the store takes writes (a probe the database
// runs on its maintenance tick), the usage writer commits and has room,
// and each channel's failures in a row. Its answer names nothing secret:
// no address, key, path or user. It imports no Caddy.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/routing"
)

// Readiness is the ready answer's body.
type Readiness struct {
	Status      string          `json:"status"` // ok or unavailable
	Store       StoreState      `json:"store"`
	UsageWriter WriterState     `json:"usage_writer"`
	Channels    []ChannelHealth `json:"channels"`
}

// StoreState is the store's part of the answer.
type StoreState struct {
	OK        bool      `json:"ok"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	Error     string    `json:"error,omitempty"`
}

// WriterState is the usage writer's part of the answer.
type WriterState struct {
	OK            bool      `json:"ok"`
	QueueDepth    int       `json:"queue_depth"`
	QueueCapacity int       `json:"queue_capacity"`
	FailingSince  time.Time `json:"failing_since,omitzero"`
	Error         string    `json:"error,omitempty"`
}

// ChannelHealth is one channel's part of the answer.
type ChannelHealth struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// ConsecutiveFailures counts the channel's failed attempts since its
	// last success.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
}

// Writer is what readiness reads of the usage writer (billing.Writer).
type Writer interface {
	QueueDepth() int
	QueueCap() int
	// FailingSince is when commits started failing, if they are.
	FailingSince() (time.Time, bool)
}

// Ready is the gateway's readiness: unavailable when the store's last
// probe failed, or the usage writer's commits fail or its queue is full.
func Ready(store *StoreProbe, wr Writer, channels []*routing.Channel) Readiness {
	rd := Readiness{Status: "ok", Channels: []ChannelHealth{}}
	rd.Store = store.State()
	rd.UsageWriter = WriterState{OK: true, QueueDepth: wr.QueueDepth(), QueueCapacity: wr.QueueCap()}
	if since, failing := wr.FailingSince(); failing {
		rd.UsageWriter.OK, rd.UsageWriter.FailingSince = false, since.UTC()
		rd.UsageWriter.Error = "usage rows cannot be committed; the writer keeps retrying"
	} else if rd.UsageWriter.QueueDepth >= rd.UsageWriter.QueueCapacity {
		rd.UsageWriter.OK, rd.UsageWriter.Error = false, "the usage queue is full"
	}
	if !rd.Store.OK || !rd.UsageWriter.OK {
		rd.Status = "unavailable"
	}
	for _, ch := range channels {
		rd.Channels = append(rd.Channels, ChannelHealth{Name: ch.Name, Type: ch.Type, ConsecutiveFailures: int64(ch.Failing())})
	}
	return rd
}

// WriteLive answers a liveness check: the process serves HTTP.
func WriteLive(w http.ResponseWriter) error {
	setHeaders(w)
	_, err := w.Write([]byte(`{"status":"ok"}` + "\n"))
	return err
}

// WriteReady answers a readiness check with rd: 200 when the gateway can
// bill, 503 when it cannot.
func WriteReady(w http.ResponseWriter, rd Readiness) error {
	setHeaders(w)
	code := http.StatusOK
	if rd.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	body, err := json.Marshal(rd)
	if err != nil {
		return err
	}
	w.WriteHeader(code)
	_, err = w.Write(append(body, '\n'))
	return err
}

func setHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
}

// StoreProbe is the result of the last write probe of the store.
type StoreProbe struct {
	failed    atomic.Bool
	checkedAt atomic.Int64 // unix nanoseconds
}

// State is the store's part of the answer: OK until a probe fails.
func (p *StoreProbe) State() StoreState {
	s := StoreState{OK: !p.failed.Load()}
	if ns := p.checkedAt.Load(); ns != 0 {
		s.CheckedAt = time.Unix(0, ns).UTC()
	}
	if !s.OK {
		s.Error = "the store does not take writes"
	}
	return s
}

// Probe checks that the store takes a write (ping, within 30s), logging
// the cause when it stops (the health answer gives none: it may name a
// file) and when it takes writes again.
func (p *StoreProbe) Probe(ctx context.Context, ping func(context.Context) error, log *zap.Logger) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := ping(pctx)
	if ctx.Err() != nil {
		return // closing down, not a verdict on the store
	}
	was := p.failed.Swap(err != nil)
	p.checkedAt.Store(time.Now().UnixNano())
	switch {
	case err != nil && !was:
		log.Error("the store does not take writes: usage cannot be billed", zap.Error(err))
	case err == nil && was:
		log.Info("the store takes writes again")
	}
}
