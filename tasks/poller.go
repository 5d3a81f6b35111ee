package tasks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/store"
)

// Start starts following the database's unfinished tasks.
func (e *Engine) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(1)
	go e.run(ctx)
}

// Stop ends the polls in flight and hands this instance's poll leases
// back, so the next configuration or another gateway takes the tasks up at
// once. Tasks still being submitted keep their submitter's lease.
func (e *Engine) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.deps.Store.ReleaseTasks(ctx, e.owner); err != nil {
		e.deps.Log.Warn("releasing task leases; other instances take the tasks up when the leases run out", zap.Error(err))
	}
}

func (e *Engine) run(ctx context.Context) {
	defer e.wg.Done()
	tick := min(e.cfg.PollInterval, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	files := time.Now()
	for {
		e.sweep(ctx)
		// expired files go within a minute, or within their retention
		// when it is shorter
		if time.Since(files) >= min(time.Minute, max(e.cfg.FileRetention, time.Second)) {
			files = time.Now()
			e.sweepFiles(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep leases as many due tasks as there are free slots and polls each.
func (e *Engine) sweep(ctx context.Context) {
	free := cap(e.slots) - len(e.slots)
	if free <= 0 {
		return
	}
	due, err := e.deps.Store.LeaseTasks(ctx, e.owner, time.Now().Add(e.cfg.Lease), free)
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Warn("leasing due tasks", zap.Error(err))
		}
		return
	}
	for _, t := range due {
		e.slots <- struct{}{}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() { <-e.slots }()
			e.follow(ctx, t, e.cfg.PollTimeout)
		}()
	}
}

// refresh polls one task now for a status call, if no one else holds it,
// and returns it as it then stands (nil: answer from the store as it is).
func (e *Engine) refresh(ctx context.Context, id string) *store.Task {
	st := e.deps.Store
	t, err := st.LeaseTask(ctx, id, e.owner, time.Now().Add(e.cfg.Lease))
	if err != nil {
		return nil
	}
	// the client hanging up does not leave the task half-saved, and a
	// vendor slow to answer keeps the client waiting a few seconds at most
	e.follow(context.WithoutCancel(ctx), t, min(e.cfg.PollTimeout, refreshTimeout))
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
func (e *Engine) follow(ctx context.Context, t *store.Task, timeout time.Duration) {
	if IsBatch(t.ID) {
		e.followBatch(ctx, t)
		return
	}
	if t.UpstreamID == "" {
		// leased here, so its submitter's lease ran out: the gateway died
		// (or was made to stop) before the vendor answered
		e.unknownOutcome(ctx, t)
		return
	}
	if time.Since(t.CreatedAt) > e.cfg.MaxAge {
		e.finish(ctx, t, &adapters.TaskState{Status: adapters.TaskFailed,
			Error: fmt.Sprintf("the task did not finish within %s, the gateway's limit (tasks max_age): it was given up and refunded", e.cfg.MaxAge)})
		return
	}
	ch := e.channel(t.Channel)
	var tp adapters.TaskProvider
	if ch != nil {
		tp, _ = ch.Provider.(adapters.TaskProvider)
	}
	if tp == nil {
		// the channel may come back with the next configuration; until
		// then, and at most until max_age, the task waits
		e.deps.Log.Warn("a task's channel is not configured (as a task channel); it waits for it", zap.String("task_id", t.ID), zap.String("channel", t.Channel))
		e.later(ctx, t, e.cfg.MaxPollInterval)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var do adapters.Doer = ch.doer()
	poll := e.startPoll(ctx, t, ch)
	if poll != nil {
		do = tracedDoer{do: do, poll: poll}
	}
	st, err := tp.PollTask(pctx, do, ch.upstream(t.Model), t.UpstreamID)
	if ctx.Err() != nil {
		poll.End("", 0, "the poller stopped")
		return // stopping: the lease goes back in stop
	}
	if err == nil {
		err = checkState(st)
	}
	if poll != nil {
		if err != nil {
			poll.End("", 0, e.ClientError(err, ch).Message)
		} else {
			poll.End(st.Status, st.Progress, "")
		}
	}
	if err != nil {
		ce := e.ClientError(err, ch)
		if ce.Status == http.StatusNotFound {
			e.finish(ctx, t, &adapters.TaskState{Status: adapters.TaskFailed, Error: "the vendor no longer knows this task: " + ce.Message})
			return
		}
		e.deps.Log.Warn("polling a task failed; trying again later", zap.String("task_id", t.ID), zap.String("channel", ch.Name), zap.Int("status", ce.Status), zap.String("error", engine.MaskKeys(err.Error(), ch.Keys)))
		e.later(ctx, t, e.backoff(t.Polls+1))
		return
	}
	if adapters.TaskTerminal(st.Status) {
		e.finish(ctx, t, st)
		return
	}
	t.Status, t.Progress = st.Status, st.Progress
	e.later(ctx, t, e.backoff(t.Polls+1))
}

// checkState refuses a state no task can be in, as an upstream fault.
func checkState(st *adapters.TaskState) error {
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
func (e *Engine) backoff(n int) time.Duration {
	d, ceiling := e.cfg.PollInterval, e.cfg.MaxPollInterval
	for i := 1; i < n && d < ceiling; i++ {
		d += d / 2
	}
	return min(d, ceiling)
}

// later saves the task with its next poll after wait, and its lease given back.
func (e *Engine) later(ctx context.Context, t *store.Task, wait time.Duration) {
	t.Polls++
	t.NextPollAt = time.Now().Add(wait)
	t.LeaseOwner = e.owner
	if err := e.deps.Store.UpdateTask(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrConflict) {
		e.deps.Log.Warn("saving a task's state", zap.String("task_id", t.ID), zap.Error(err))
	}
}
