package caddymodule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
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

func (c *TasksConfig) maxAge() time.Duration {
	if c == nil || c.MaxAge <= 0 {
		return 24 * time.Hour
	}
	return time.Duration(c.MaxAge)
}

func (c *TasksConfig) pollInterval() time.Duration {
	if c == nil || c.PollInterval <= 0 {
		return 5 * time.Second
	}
	return time.Duration(c.PollInterval)
}

func (c *TasksConfig) maxPollInterval() time.Duration {
	if c == nil || c.MaxPollInterval <= 0 {
		return max(time.Minute, c.pollInterval())
	}
	return max(time.Duration(c.MaxPollInterval), c.pollInterval())
}

func (c *TasksConfig) pollTimeout() time.Duration {
	if c == nil || c.PollTimeout <= 0 {
		return 30 * time.Second
	}
	return time.Duration(c.PollTimeout)
}

func (c *TasksConfig) concurrency() int {
	if c == nil || c.Concurrency <= 0 {
		return 16
	}
	return c.Concurrency
}

func (c *TasksConfig) lease() time.Duration {
	if c == nil || c.Lease <= 0 {
		return 2 * time.Minute
	}
	// a lease outlasts the poll it covers
	return max(time.Duration(c.Lease), c.pollTimeout()+5*time.Second)
}

func (c *TasksConfig) maxFileSize() int64 {
	if c == nil || c.MaxFileSize <= 0 {
		return 2 << 30
	}
	return c.MaxFileSize
}

// taskPoller follows every unfinished task of the database to its end, for
// one app instance: started in Start, stopped in Stop. Tasks are leased in
// the store, so the instances of a reload, or two gateways on one
// database, never poll or settle a task twice.
type taskPoller struct {
	app   *App
	cfg   *TasksConfig
	owner string // this instance's name on the leases of tasks it polls
	// submitter is its name on the leases of tasks being submitted, which
	// stop does not hand back: a submit outlives its configuration's stop
	// (the server drains it), and only it can record the vendor's answer
	submitter string
	log       *zap.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // polls in flight
}

func newTaskPoller(a *App, cfg *TasksConfig, log *zap.Logger) *taskPoller {
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	return &taskPoller{app: a, cfg: cfg, log: log, owner: owner, submitter: owner + "/submit",
		slots: make(chan struct{}, cfg.concurrency())}
}

// submitLease is how long a submit holds its new task: as long as every
// channel of its plan may take to answer in turn, and then some. Until it
// runs out no poller takes the task up, so none fails a task whose vendor
// may still accept it.
func (p *taskPoller) submitLease(plan []taskChannel) time.Duration {
	var d time.Duration
	for _, tc := range plan {
		d += p.app.bounds[tc.ch.Name].timeout
	}
	return d + p.cfg.lease()
}

func (p *taskPoller) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go p.run(ctx)
}

// stop ends the polls in flight and hands this instance's poll leases
// back, so the next configuration or another gateway takes the tasks up at
// once. Tasks still being submitted keep their submitter's lease.
func (p *taskPoller) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.app.db.store.ReleaseTasks(ctx, p.owner); err != nil {
		p.log.Warn("releasing task leases; other instances take the tasks up when the leases run out", zap.Error(err))
	}
}

func (p *taskPoller) run(ctx context.Context) {
	defer p.wg.Done()
	tick := min(p.cfg.pollInterval(), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		p.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep leases as many due tasks as there are free slots and polls each.
func (p *taskPoller) sweep(ctx context.Context) {
	free := cap(p.slots) - len(p.slots)
	if free <= 0 {
		return
	}
	tasks, err := p.app.db.store.LeaseTasks(ctx, p.owner, time.Now().Add(p.cfg.lease()), free)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("leasing due tasks", zap.Error(err))
		}
		return
	}
	for _, t := range tasks {
		p.slots <- struct{}{}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			p.follow(ctx, t, p.cfg.pollTimeout())
		}()
	}
}

// refresh polls one task now for a status call, if no one else holds it,
// and returns it as it then stands (nil: answer from the store as it is).
func (p *taskPoller) refresh(ctx context.Context, id string) *store.Task {
	st := p.app.db.store
	t, err := st.LeaseTask(ctx, id, p.owner, time.Now().Add(p.cfg.lease()))
	if err != nil {
		return nil
	}
	// the client hanging up does not leave the task half-saved, and a
	// vendor slow to answer keeps the client waiting a few seconds at most
	p.follow(context.WithoutCancel(ctx), t, min(p.cfg.pollTimeout(), refreshTimeout))
	fresh, err := st.TaskByID(ctx, id)
	if err != nil {
		return nil
	}
	return fresh
}

// refreshTimeout bounds the poll a status call makes.
const refreshTimeout = 5 * time.Second

// follow polls one leased task once, waiting at most timeout for the
// vendor, and saves what it learned: a terminal state settles the task,
// any other schedules the next poll. ctx ends only when the poller stops.
func (p *taskPoller) follow(ctx context.Context, t *store.Task, timeout time.Duration) {
	a := p.app
	if t.UpstreamID == "" {
		// leased here, so its submitter's lease ran out: the gateway died
		// (or was made to stop) before the vendor answered
		p.unknownOutcome(ctx, t)
		return
	}
	if time.Since(t.CreatedAt) > p.cfg.maxAge() {
		p.finish(ctx, t, &adapters.TaskState{Status: adapters.TaskFailed,
			Error: fmt.Sprintf("the task did not finish within %s, the gateway's limit (tasks max_age): it was given up and refunded", p.cfg.maxAge())})
		return
	}
	ch := a.channels.Channel(t.Channel)
	tp, ok := a.providers[t.Channel].(adapters.TaskProvider)
	if ch == nil || !ok {
		// the channel may come back with the next configuration; until
		// then, and at most until max_age, the task waits
		p.log.Warn("a task's channel is not configured (as a task channel); it waits for it", zap.String("task_id", t.ID), zap.String("channel", t.Channel))
		p.later(ctx, t, p.cfg.maxPollInterval())
		return
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	up := &adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(t.Model)}
	st, err := tp.PollTask(pctx, p.doer(ch.Name), up, t.UpstreamID)
	if ctx.Err() != nil {
		return // stopping: the lease goes back in stop
	}
	if err == nil {
		err = checkTaskState(st)
	}
	if err != nil {
		e := maskedError(err, ch)
		if e.Status == http.StatusNotFound {
			p.finish(ctx, t, &adapters.TaskState{Status: adapters.TaskFailed, Error: "the vendor no longer knows this task: " + e.Message})
			return
		}
		p.log.Warn("polling a task failed; trying again later", zap.String("task_id", t.ID), zap.String("channel", ch.Name), zap.Int("status", e.Status), zap.String("error", maskKeys(err.Error(), ch.Keys)))
		p.later(ctx, t, p.backoff(t.Polls+1))
		return
	}
	if adapters.TaskTerminal(st.Status) {
		p.finish(ctx, t, st)
		return
	}
	t.Status, t.Progress = st.Status, st.Progress
	p.later(ctx, t, p.backoff(t.Polls+1))
}

// checkTaskState refuses a state no task can be in, as an upstream fault.
func checkTaskState(st *adapters.TaskState) error {
	if st == nil {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream's answer says nothing of the task")
	}
	switch st.Status {
	case adapters.TaskNotStarted, adapters.TaskRunning, adapters.TaskFinished, adapters.TaskFailed:
	default:
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream reported the task as %q", st.Status)
	}
	st.Progress = min(max(st.Progress, 0), 100)
	for i := range st.Files {
		switch st.Files[i].Type {
		case adapters.FileImage, adapters.FileVideo, adapters.FileAudio, adapters.FileOther:
		default:
			st.Files[i].Type = adapters.FileOther
		}
	}
	return nil
}

// backoff is the wait before poll n: the poll interval growing by half
// each poll, up to max_poll_interval.
func (p *taskPoller) backoff(n int) time.Duration {
	d, ceiling := p.cfg.pollInterval(), p.cfg.maxPollInterval()
	for i := 1; i < n && d < ceiling; i++ {
		d += d / 2
	}
	return min(d, ceiling)
}

// later saves the task with its next poll after wait, and its lease given back.
func (p *taskPoller) later(ctx context.Context, t *store.Task, wait time.Duration) {
	t.Polls++
	t.NextPollAt = time.Now().Add(wait)
	t.LeaseOwner = p.owner
	if err := p.app.db.store.UpdateTask(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrConflict) {
		p.log.Warn("saving a task's state", zap.String("task_id", t.ID), zap.Error(err))
	}
}

// finish settles a task at its terminal state: a finished task is charged
// its real seconds at the prices fixed at submit (never more than was
// reserved), a failed one nothing; the reservation comes back in the same
// transaction, exactly once however many instances try.
func (p *taskPoller) finish(ctx context.Context, t *store.Task, st *adapters.TaskState) {
	a := p.app
	t.Status = st.Status
	t.Progress = st.Progress
	t.Cost = 0
	status := http.StatusOK
	if st.Status == adapters.TaskFinished {
		t.Progress = 100
		t.Error = ""
		files := st.Files
		if files == nil {
			files = []adapters.TaskFile{}
		}
		b, _ := json.Marshal(files)
		t.Files = string(b)
		t.Cost = t.Reserved
		if seconds := st.Seconds; seconds > 0 || t.Duration > 0 {
			if seconds <= 0 {
				seconds = float64(t.Duration)
			}
			t.Cost = min(billing.TaskCost(t.PriceTask, t.PriceSecond, seconds), t.Reserved)
		}
	} else {
		t.Error = st.Error
		if t.Error == "" {
			t.Error = "the vendor reported the task failed without giving a reason"
		}
		status = http.StatusBadGateway
	}
	now := time.Now()
	row := &store.UsageLog{CreatedAt: now, Model: t.Model, Channel: t.Channel, Endpoint: tasks.SubmitPath,
		Status: status, Error: t.Error, LatencyMS: now.Sub(t.CreatedAt).Milliseconds(),
		RequestID: t.RequestID, UpstreamRequestID: t.UpstreamID}
	settled, err := a.db.store.FinishTask(ctx, t, row)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("settling a task; trying again at its next poll", zap.String("task_id", t.ID), zap.Error(err))
			t.LeaseOwner = p.owner
			p.later(ctx, t, p.cfg.pollInterval())
		}
		return
	}
	if settled {
		a.db.ledger.Returned(t.UserID, t.TokenID, t.Reserved-t.Cost)
		a.metrics.taskCost(t.Model, t.UserID, t.Cost)
		p.log.Info("task settled", zap.String("task_id", t.ID), zap.String("status", t.Status), zap.Int64("cost", t.Cost), zap.Int64("refunded", t.Reserved-t.Cost))
	}
}

// unknownOutcomeError is the error of a task whose submit never answered.
const unknownOutcomeError = "the gateway stopped while the vendor was taking this task, so whether the vendor accepted it is not known. " +
	"It was charged what was reserved for it, not refunded: the vendor may have made it (and called your callback_url). " +
	"Ask the gateway's operator, with this task_id, to check it with the vendor"

// unknownOutcome settles a task whose submit died before the vendor
// answered (a crash, a kill, a grace period cut short). The vendor may have
// accepted it and bills the operator for it, and may deliver it to the
// client's callback; it may as well never have seen it. The gateway cannot
// tell, so it guesses neither way for free: the task fails, charged its
// reservation, and the log names it so the operator can check it with
// the vendor and credit the user back if it was never made.
func (p *taskPoller) unknownOutcome(ctx context.Context, t *store.Task) {
	a := p.app
	t.Status, t.Progress, t.Error, t.Cost = adapters.TaskFailed, 0, unknownOutcomeError, t.Reserved
	now := time.Now()
	row := &store.UsageLog{CreatedAt: now, Model: t.Model, Channel: t.Channel, Endpoint: tasks.SubmitPath,
		Status: http.StatusBadGateway, Error: t.Error, LatencyMS: now.Sub(t.CreatedAt).Milliseconds(), RequestID: t.RequestID}
	settled, err := a.db.store.FinishTask(ctx, t, row)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("settling a task whose submit never answered; trying again at its next poll", zap.String("task_id", t.ID), zap.Error(err))
			t.LeaseOwner = p.owner
			p.later(ctx, t, p.cfg.pollInterval())
		}
		return
	}
	if settled {
		a.metrics.taskCost(t.Model, t.UserID, t.Cost)
		p.log.Error("a task's submit never answered: charged its reservation, not refunded; check it with the vendor",
			zap.String("task_id", t.ID), zap.String("model", t.Model), zap.Int64("user_id", t.UserID),
			zap.String("request_id", t.RequestID), zap.Time("submitted", t.CreatedAt), zap.Int64("cost", t.Cost))
	}
}

// doer is the channel's HTTP client with its answers bounded in size.
func (p *taskPoller) doer(channel string) adapters.Doer {
	return boundedDoer{c: p.app.clients[channel], max: p.app.bounds[channel].maxResponseBody}
}

// boundedDoer sends through a channel's client and cuts an answer longer
// than max with an error, so an upstream that lies cannot grow memory.
type boundedDoer struct {
	c   *http.Client
	max int64
}

func (d boundedDoer) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{rc: resp.Body, left: d.max + 1}
	return resp, nil
}

var errAnswerTooLarge = errors.New("the upstream's answer is larger than the channel's max_response_body")

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

// Read reads at most max+1 bytes: the one past max is the error.
func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n - 1, errAnswerTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
