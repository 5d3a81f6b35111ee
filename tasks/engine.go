package tasks

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Engine runs tasks for one configuration of the gateway: it submits them,
// answers their status and files, and follows every unfinished task of the
// database to its end (Start to Stop). Tasks are leased in the store, so
// the configurations of a reload, or two gateways on one database, never
// poll or settle a task twice.
type Engine struct {
	cfg  Config
	deps Deps

	owner string // this instance's name on the leases of tasks it polls
	// submitter is its name on the leases of tasks being submitted, which
	// Stop does not hand back: a submit outlives its configuration's stop
	// (the server drains it), and only it can record the vendor's answer
	submitter string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // polls in flight
}

// Deps are what the engine uses but does not own, given by the app.
type Deps struct {
	Store Store
	// Engine is the request engine every endpoint uses: it plans a
	// submit's channels and fails over between them (one classifier, one
	// count of a channel's failures for ejection and metrics), its Gate
	// admits the task's reservation, and its Channels, Upstreams, Prices
	// and Rows are the configuration's.
	Engine *engine.Engine
	// TaskCost observes what a settled task cost (metrics); may be nil.
	TaskCost func(model string, userID, cost int64)
	// Log is the engine's own logger (the poller's lines).
	Log *zap.Logger
	// Dialect is the client dialect of a name ("openai", "anthropic"),
	// nil for none: a batch on channels without a batch API runs its
	// lines through the request engine in it (batchlocal.go).
	Dialect func(name string) adapters.Dialect
}

// Store is the part of store.Store the engine uses.
type Store interface {
	CreateTask(ctx context.Context, t *store.Task) error
	TaskByID(ctx context.Context, id string) (*store.Task, error)
	UpdateTask(ctx context.Context, t *store.Task) error
	LeaseTasks(ctx context.Context, owner string, until time.Time, limit int) ([]*store.Task, error)
	LeaseTask(ctx context.Context, id, owner string, until time.Time) (*store.Task, error)
	ReleaseTasks(ctx context.Context, owner string) error
	FinishTask(ctx context.Context, t *store.Task, row *store.UsageLog) (bool, error)
	SetTaskTrace(ctx context.Context, id string, trace store.TaskTrace) error
	TaskTrace(ctx context.Context, id string) (store.TaskTrace, error)
	// files and batches (batchfiles.go, batch.go)
	store.FileStore
}

// Channel is one upstream channel as the engine uses it.
type Channel struct {
	*routing.Channel
	// Provider is the channel's adapter: the engine asks it for
	// adapters.TaskProvider and adapters.TaskFetcher.
	Provider any
	// Client is the channel's HTTP client; it follows no redirects.
	Client *http.Client
	// Timeout bounds one whole exchange with the upstream (a submit, a
	// file download).
	Timeout time.Duration
	// MaxResponseBody bounds an upstream's answer to a submit or a poll.
	MaxResponseBody int64
}

// channel is the named channel with its upstream, nil when the
// configuration has none of that name.
func (e *Engine) channel(name string) *Channel {
	ch := e.deps.Engine.Channels.Channel(name)
	if ch == nil {
		return nil
	}
	return e.withUpstream(ch)
}

func (e *Engine) withUpstream(ch *routing.Channel) *Channel {
	up := e.deps.Engine.Upstreams.Get(ch.Name)
	if up == nil {
		return &Channel{Channel: ch}
	}
	return &Channel{Channel: ch, Provider: up.Provider, Client: up.Client, Timeout: up.Bounds.Timeout, MaxResponseBody: up.Bounds.MaxResponseBody}
}

// New returns an engine for one configuration; Start starts its poller.
func New(cfg Config, deps Deps) *Engine {
	cfg = cfg.withDefaults()
	if deps.Log == nil {
		deps.Log = zap.NewNop()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	return &Engine{cfg: cfg, deps: deps, owner: owner, submitter: owner + "/submit",
		slots: make(chan struct{}, cfg.Concurrency)}
}

// Config is the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// NewID is task_ and 130 random bits: unguessable, so knowing one task's
// id tells nothing of another's.
func NewID() string {
	var b [17]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "task_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:26]
}

func (c *Channel) upstream(model string) *adapters.Upstream {
	return &adapters.Upstream{Channel: c.Name, BaseURL: c.BaseURL, Key: c.Key(), Model: c.UpstreamModel(model)}
}

// doer is the channel's HTTP client with its answers bounded in size.
func (c *Channel) doer() adapters.Doer {
	return boundedDoer{c: c.Client, max: c.MaxResponseBody}
}
