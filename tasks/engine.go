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
	"github.com/caddy-model-gateway/gateway/billing"
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
	Store    Store
	Ledger   Ledger
	Usage    UsageRecorder
	Channels Channels
	// Prices are the models' prices, by model name.
	Prices map[string]*billing.Price
	// Failover sends a submit to a plan's channels in turn.
	Failover Failover
	// MaskKeys hides keys in upstream text bound for a client or the log.
	MaskKeys func(s string, keys []string) string
	// TaskCost observes what a settled task cost (metrics); may be nil.
	TaskCost func(model string, userID, cost int64)
	// Log is the engine's own logger (the poller's lines).
	Log *zap.Logger
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
}

// Ledger is the in-memory quota a task's reservation is admitted against
// (billing.Ledger). The reservation itself moves to the store with the
// task: Debited once it is stored, Returned for what a settled task did
// not cost.
type Ledger interface {
	Admit(u *store.User, t *store.Token, amount int64) (billing.Hold, bool)
	Available(userID int64) (int64, bool)
	Settle(h billing.Hold, cost int64)
	Debited(h billing.Hold)
	Returned(userID, tokenID, amount int64)
}

// UsageRecorder records the usage row of a request refused before it held
// a usage-queue slot (billing.Writer).
type UsageRecorder interface {
	WriteUnadmitted(row *store.UsageLog)
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

// Channels are the configuration's channels.
type Channels interface {
	// Channel is the named channel, nil when none is configured.
	Channel(name string) *Channel
	// Plan is the channels to try for model, in the order to try them.
	Plan(model string) []*Channel
	// Has reports whether any channel serves model.
	Has(model string) bool
}

// Failover sends a task to the plan's channels in turn, with send, until
// one takes it or refuses the request itself, and returns the outcome. It
// is the app's: the one place that classifies a channel's failure, fails
// over, and counts the failure for ejection and for metrics; log is the
// caller's logger, which its lines name.
type Failover func(ctx context.Context, log *zap.Logger, plan []*Channel, send Send) Outcome

// Send submits the task to one channel: its answer is the vendor's id for
// the task, or the error, raw (the failover loop masks it for the client
// with Engine.ClientError and logs it).
type Send func(ctx context.Context, ch *Channel) (upstreamID string, err error)

// Outcome is how a submit's failover ended.
type Outcome struct {
	// Channel took the task (Err nil) or refused the request itself; nil
	// when every channel failed on its own account.
	Channel    *Channel
	UpstreamID string
	// Err is the client's error when no channel took the task.
	Err *adapters.Error
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
