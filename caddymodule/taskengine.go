package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/relayhttp"
	"github.com/caddy-model-gateway/gateway/tasks"
	"github.com/caddy-model-gateway/gateway/tasks/taskapi"
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

// newTaskEngine wires the task engine to the request engine (this
// configuration's channels, prices, failover loop and admission gate) and
// to the shared database's store.
func (a *App) newTaskEngine() *tasks.Engine {
	cfg := a.Tasks.engineConfig()
	a.Batches.apply(&cfg, a.batchDir)
	return tasks.New(cfg, tasks.Deps{
		Store:    a.db.Store,
		Engine:   a.engine,
		TaskCost: a.metrics.TaskCost,
		Log:      a.log.Named("tasks"),
		Dialect: func(name string) adapters.Dialect {
			for _, d := range a.dialects {
				if d.Name() == name {
					return d
				}
			}
			return nil
		},
	})
}

// taskAPI wires the task and batch endpoints (tasks/taskapi) to this
// configuration's task engine, body budget and database, logging to log.
func (a *App) taskAPI(log *zap.Logger) *taskapi.API {
	return taskapi.New(taskapi.Config{
		Tasks:          a.tasks,
		Engine:         a.engine,
		Usage:          a.db.Writer,
		Bodies:         a.inflight,
		MaxRequestBody: a.MaxRequestBody,
		MaxElements:    a.MaxElements,
		Fetch:          a.fetch,
		TaskDialect:    a.taskDialect,
		Request:        a.serverSide(log),
		BodyBusy: func(err error, h http.Header) *adapters.Error {
			return relayhttp.BodyBusy(err, h, a.inflight, false)
		},
		BodyReadError: relayhttp.BodyReadError,
		RefuseUnread:  a.refuseUnread,
	})
}
