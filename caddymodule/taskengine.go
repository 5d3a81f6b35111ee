package caddymodule

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// TasksConfig tunes how submitted tasks are followed.
type TasksConfig struct {
	// MaxAge is how long a task may run; past it, it fails and is refunded.
	// Default 24h.
	MaxAge caddy.Duration `json:"max_age,omitempty"`
	// PollInterval is the wait before a task's first poll and the base of
	// its backoff; a status call refreshes a task older than it. Default 5s.
	PollInterval caddy.Duration `json:"poll_interval,omitempty"`
	// MaxPollInterval caps the backoff between two polls. Default 1m.
	MaxPollInterval caddy.Duration `json:"max_poll_interval,omitempty"`
	// PollTimeout bounds one poll of the upstream. Default 30s.
	PollTimeout caddy.Duration `json:"poll_timeout,omitempty"`
	// Concurrency bounds the polls in flight at once. Default 16.
	Concurrency int `json:"concurrency,omitempty"`
	// Lease is how long an instance holds a task it polls; a task held by
	// an instance that died is taken up by another after it. Default 2m.
	Lease caddy.Duration `json:"lease,omitempty"`
	// MaxFileSize bounds one file streamed from an upstream to a client.
	// Default 2 GiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
}

// engineConfig is the task engine's configuration (defaults are the
// engine's).
func (c *TasksConfig) engineConfig() tasks.Config {
	if c == nil {
		return tasks.Config{}
	}
	return tasks.Config{MaxAge: time.Duration(c.MaxAge), PollInterval: time.Duration(c.PollInterval),
		MaxPollInterval: time.Duration(c.MaxPollInterval), PollTimeout: time.Duration(c.PollTimeout),
		Concurrency: c.Concurrency, Lease: time.Duration(c.Lease), MaxFileSize: c.MaxFileSize}
}

// newTaskEngine wires the task engine to this configuration's channels,
// prices and metrics and to the shared database's store, ledger and usage
// writer.
func (a *App) newTaskEngine() *tasks.Engine {
	return tasks.New(a.Tasks.engineConfig(), tasks.Deps{
		Store:    a.db.store,
		Ledger:   a.db.ledger,
		Usage:    a.db.writer,
		Channels: taskChannels{a},
		Prices:   a.prices,
		Failover: a.submitOverChannels,
		MaskKeys: maskKeys,
		TaskCost: a.metrics.TaskCost,
		Log:      a.log.Named("tasks"),
	})
}

// taskChannels are the app's channels as the task engine sees them.
type taskChannels struct{ a *App }

func (c taskChannels) Channel(name string) *tasks.Channel {
	ch := c.a.channels.Channel(name)
	if ch == nil {
		return nil
	}
	return c.a.taskChannel(ch)
}

func (c taskChannels) Plan(model string) []*tasks.Channel {
	var plan []*tasks.Channel
	for _, ch := range c.a.channels.Plan(model, c.a.MaxAttempts) {
		plan = append(plan, c.a.taskChannel(ch))
	}
	return plan
}

func (c taskChannels) Has(model string) bool { return c.a.channels.Has(model) }

func (a *App) taskChannel(ch *routing.Channel) *tasks.Channel {
	up := a.engine.Upstreams[ch.Name]
	return &tasks.Channel{Channel: ch, Provider: up.Provider, Client: up.Client,
		Timeout: up.Bounds.Timeout, MaxResponseBody: up.Bounds.MaxResponseBody}
}

// submitOverChannels is the task submit's failover loop: each channel of
// the plan in turn until one takes the task or the vendor refuses the
// request itself. When the request engine's one failover loop is ready,
// this function is what it replaces (newTaskEngine's Failover).
func (a *App) submitOverChannels(ctx context.Context, log *zap.Logger, plan []*tasks.Channel, send tasks.Send) tasks.Outcome {
	var last *adapters.Error
	for i, ch := range plan {
		upstreamID, err := send(ctx, ch)
		if err == nil {
			ch.Succeeded()
			return tasks.Outcome{Channel: ch, UpstreamID: upstreamID}
		}
		e := a.tasks.ClientError(err, ch)
		if !isChannelFault(e) {
			// the vendor refused the request itself: its reason, at no cost
			return tasks.Outcome{Channel: ch, Err: e}
		}
		// the channel's trouble (its key, its account, an outage) is told
		// in the gateway's words; the vendor's go to the log
		last = adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream could not take the task (it answered HTTP %d); try again shortly", e.Status)
		if e.Status == http.StatusGatewayTimeout {
			last = e
		}
		if ch.Failed(a.health, time.Now(), 0) {
			log.Warn("channel ejected", zap.String("channel", ch.Name), zap.Int("status", e.Status))
		}
		a.logFailure(log, ch.Channel, &failure{err: e, detail: maskKeys(err.Error(), ch.Keys)}, failover(i+1 < len(plan)))
	}
	return tasks.Outcome{Err: last}
}

// isChannelFault reports whether a submit failure is the channel's (its
// key, its quota, the vendor down), so another channel may serve the task,
// rather than the vendor refusing the request itself.
func isChannelFault(e *adapters.Error) bool {
	if e.Fault == adapters.FaultChannel {
		return true
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout ||
		e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}
