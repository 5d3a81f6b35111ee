package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Health{})
}

// Health answers health checks: "live" says the process serves HTTP;
// "ready" (the default) says whether the gateway can bill, and answers 503
// when it cannot: the store refuses writes, or the usage writer's commits
// fail or its queue is full. The answer names the store, the usage writer
// and each channel, and nothing secret: no address, key, path or user.
// It takes no API key; it ends the route.
type Health struct {
	// Check is "ready" (default) or "live".
	Check string `json:"check,omitempty"`

	app *App
}

// CaddyModule returns the Caddy module information.
func (Health) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_health",
		New: func() caddy.Module { return new(Health) },
	}
}

// Provision finds the gateway app.
func (h *Health) Provision(ctx caddy.Context) error {
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	return nil
}

// Validate checks the kind of check.
func (h *Health) Validate() error {
	switch h.Check {
	case "", "ready", "live":
		return nil
	}
	return fmt.Errorf("gateway_health: check must be ready or live, not %q", h.Check)
}

// readiness is the ready answer's body.
type readiness struct {
	Status      string          `json:"status"` // ok or unavailable
	Store       storeState      `json:"store"`
	UsageWriter writerState     `json:"usage_writer"`
	Channels    []channelHealth `json:"channels"`
}

type storeState struct {
	OK        bool      `json:"ok"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	Error     string    `json:"error,omitempty"`
}

type writerState struct {
	OK            bool      `json:"ok"`
	QueueDepth    int       `json:"queue_depth"`
	QueueCapacity int       `json:"queue_capacity"`
	FailingSince  time.Time `json:"failing_since,omitzero"`
	Error         string    `json:"error,omitempty"`
}

type channelHealth struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// ConsecutiveFailures counts the channel's failed attempts since its
	// last success.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
}

func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request, _ caddyhttp.Handler) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if h.Check == "live" {
		_, err := w.Write([]byte(`{"status":"ok"}` + "\n"))
		return err
	}
	rd := h.app.readiness()
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

func (a *App) readiness() readiness {
	db := a.db
	rd := readiness{Status: "ok", Channels: []channelHealth{}}
	rd.Store = db.health.state()
	wr := db.writer
	rd.UsageWriter = writerState{OK: true, QueueDepth: wr.QueueDepth(), QueueCapacity: wr.QueueCap()}
	if since, failing := wr.FailingSince(); failing {
		rd.UsageWriter.OK, rd.UsageWriter.FailingSince = false, since.UTC()
		rd.UsageWriter.Error = "usage rows cannot be committed; the writer keeps retrying"
	} else if rd.UsageWriter.QueueDepth >= rd.UsageWriter.QueueCapacity {
		rd.UsageWriter.OK, rd.UsageWriter.Error = false, "the usage queue is full"
	}
	if !rd.Store.OK || !rd.UsageWriter.OK {
		rd.Status = "unavailable"
	}
	for _, ch := range a.channels.All() {
		rd.Channels = append(rd.Channels, channelHealth{Name: ch.Name, Type: ch.Type, ConsecutiveFailures: int64(ch.Failing())})
	}
	return rd
}

// storeHealth is the result of the last write probe of the store.
type storeHealth struct {
	failed    atomic.Bool
	checkedAt atomic.Int64 // unix nanoseconds
}

func (sh *storeHealth) state() storeState {
	s := storeState{OK: !sh.failed.Load()}
	if ns := sh.checkedAt.Load(); ns != 0 {
		s.CheckedAt = time.Unix(0, ns).UTC()
	}
	if !s.OK {
		s.Error = "the store does not take writes"
	}
	return s
}

// probe checks that the store takes a write, logging the cause when it
// stops (the health answer gives none: it may name a file).
func (db *database) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := db.store.Ping(pctx)
	if ctx.Err() != nil {
		return // closing down, not a verdict on the store
	}
	was := db.health.failed.Swap(err != nil)
	db.health.checkedAt.Store(time.Now().UnixNano())
	switch {
	case err != nil && !was:
		db.log.Error("the store does not take writes: usage cannot be billed", zap.Error(err))
	case err == nil && was:
		db.log.Info("the store takes writes again")
	}
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Health)(nil)
	_ caddy.Provisioner           = (*Health)(nil)
	_ caddy.Validator             = (*Health)(nil)
)
