package tasks

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// batchWindow is the completion window vendors give a batch.
const batchWindow = 24 * time.Hour

// followBatch moves a leased batch one step: start it at the vendor,
// poll it, or, once the vendor has ended it, settle it from its results.
func (e *Engine) followBatch(ctx context.Context, t *store.Task) {
	st := readState(t)
	if st.Local {
		e.runLocal(ctx, t, st)
		return
	}
	if t.UpstreamID == "" {
		e.submitBatch(ctx, t, st)
		return
	}
	ch := e.channel(t.Channel)
	var bp adapters.BatchProvider
	if ch != nil {
		bp, _ = ch.Provider.(adapters.BatchProvider)
	}
	if bp == nil {
		e.deps.Log.Warn("a batch's channel is not configured (as a batch channel); it waits for it", zap.String("batch_id", t.ID), zap.String("channel", t.Channel))
		e.later(ctx, t, e.cfg.MaxPollInterval)
		return
	}
	// past its vendor's 24-hour window and the tasks' max_age, a batch is
	// cancelled at the vendor (its answered lines still billed), and one
	// its vendor no longer answers for is ended refunded
	overdue := time.Since(t.CreatedAt) > batchWindow+e.cfg.MaxAge
	if overdue && st.CancelRequestedAt == 0 {
		st.CancelRequestedAt = time.Now().Unix()
	}
	if st.CancelRequestedAt != 0 {
		e.sendCancel(ctx, t, st)
	}
	pctx, cancel := context.WithTimeout(ctx, e.cfg.PollTimeout)
	vs, err := bp.PollBatch(pctx, ch.doer(), ch.upstream(t.Model), t.UpstreamID)
	cancel()
	if ctx.Err() != nil {
		return // stopping: the lease goes back in stop
	}
	if err != nil {
		ce := e.ClientError(err, ch)
		if ce.Status == http.StatusNotFound {
			e.endBatch(ctx, t, st, adapters.TaskFailed, "the vendor no longer knows this batch: "+ce.Message)
			return
		}
		if overdue && time.Since(t.CreatedAt) > batchWindow+2*e.cfg.MaxAge {
			e.endBatch(ctx, t, st, adapters.TaskFailed, "the vendor did not answer for this batch within its window and the gateway's max_age: it was given up and refunded")
			return
		}
		e.deps.Log.Warn("polling a batch failed; trying again later", zap.String("batch_id", t.ID), zap.String("channel", ch.Name),
			zap.Int("status", ce.Status), zap.String("error", engine.MaskKeys(err.Error(), ch.Keys)))
		st.save(t)
		e.later(ctx, t, e.backoff(t.Polls+1))
		return
	}
	st.Done = vs.Done
	switch {
	case !vs.Ended:
		t.Status = adapters.TaskRunning
		if vs.Total > 0 {
			t.Progress = int(min(vs.Done*100/vs.Total, 99))
		}
		st.save(t)
		e.later(ctx, t, e.backoff(t.Polls+1))
	case vs.Failed:
		e.endBatch(ctx, t, st, adapters.TaskFailed, vs.Error)
	default:
		e.settleBatch(ctx, t, st, ch, bp, vs)
	}
}

// submitBatch starts a stored batch at the vendor, over the model's batch
// channels in the engine's order: the lines go with the channel's name of
// the model. No channel taking it ends it refunded.
func (e *Engine) submitBatch(ctx context.Context, t *store.Task, st *batchState) {
	lines, ae := e.readLines(e.filePath(st.InputFileID), st.Dialect, st.Endpoint)
	if ae != nil {
		e.endBatch(ctx, t, st, adapters.TaskFailed, "the batch's input could not be read: "+ae.Message)
		return
	}
	eng := e.deps.Engine
	plan := e.batchPlan(t.Model, st.Dialect, st.Endpoint, len(lines))
	var upstreamID string
	_, f := eng.RunDetached(t.Model, plan, engine.AttemptFunc(func(rc *routing.Channel) *engine.Failure {
		ch := e.withUpstream(rc)
		bp := ch.Provider.(adapters.BatchProvider) // the plan keeps batch families only
		job := &adapters.BatchJob{ID: t.ID, Endpoint: st.Endpoint, Lines: make([]adapters.BatchLine, len(lines))}
		upModel := rc.UpstreamModel(t.Model)
		_, neutral := bp.(adapters.NeutralBatchProvider)
		for i, l := range lines {
			body, err := adapters.SetFields(l.Body, adapters.Field{Key: "model", Value: upModel})
			if err != nil {
				return &engine.Failure{Err: adapters.BadRequest("request %q of the batch cannot be sent: %v", l.CustomID, err)}
			}
			job.Lines[i] = adapters.BatchLine{CustomID: l.CustomID, Body: body}
			if neutral {
				req, ae := e.decodeLine(ctx, st, l)
				if ae != nil {
					return &engine.Failure{Err: ae}
				}
				req.Model = upModel
				job.Lines[i].Req = req
			}
		}
		at := engine.NewAttempt(ctx, ch.Timeout, 0, false)
		defer at.End()
		id, err := bp.SubmitBatch(at.Ctx, ch.doer(), ch.upstream(t.Model), job)
		if err == nil {
			upstreamID, t.Channel = id, rc.Name
			return nil
		}
		var ue *adapters.Error
		if errors.As(err, &ue) {
			return eng.UpstreamFailure(rc, ue, nil)
		}
		return eng.TransportFailure(rc, at, err)
	}))
	if ctx.Err() != nil {
		return
	}
	if f != nil {
		if f.Channel && f.Err.Status >= 500 && t.Polls < 3 {
			// every channel failing at once is likelier an outage than
			// the batch's fault: try again a few times before giving up
			e.later(ctx, t, e.backoff(t.Polls+1))
			return
		}
		e.endBatch(ctx, t, st, adapters.TaskFailed, "no channel took the batch: "+f.Err.Message)
		return
	}
	t.UpstreamID, t.Status = upstreamID, adapters.TaskRunning
	st.InProgressAt = time.Now().Unix()
	st.save(t)
	t.Polls = 0
	e.later(ctx, t, e.cfg.PollInterval)
}

// settleBatch reads an ended batch's results line by line, bills each
// succeeded line at the batch price fixed at creation, writes the output
// (and error) file, and settles the batch with a usage row per line in one
// transaction: what the lines did not cost comes back.
func (e *Engine) settleBatch(ctx context.Context, t *store.Task, st *batchState, ch *Channel, bp adapters.BatchProvider, vs *adapters.BatchState) {
	rctx, cancel := context.WithTimeout(ctx, max(ch.Timeout, e.cfg.PollTimeout))
	defer cancel()
	var d adapters.Dialect
	if _, neutral := bp.(adapters.NeutralBatchProvider); neutral && e.deps.Dialect != nil {
		d = e.deps.Dialect(st.Dialect)
	}
	e.settleResults(ctx, t, st, func(each func(*adapters.BatchResult) error) error {
		n := 0
		var seen map[string]bool
		if d != nil && st.Dialect == DialectAnthropic {
			seen = map[string]bool{}
		}
		err := bp.BatchResults(rctx, ch.Client, ch.upstream(t.Model), t.UpstreamID, vs, e.cfg.MaxBatchResults, func(r *adapters.BatchResult) error {
			if r.Line == nil && d != nil {
				// a translated line's answer, rendered in the batch's dialect
				if r.Resp != nil {
					r.Resp.Model = t.Model
				}
				e.renderLine(d, st, r, r.CustomID, n, nil)
			}
			if seen != nil {
				seen[r.CustomID] = true
			}
			n++
			return each(r)
		})
		if err != nil {
			return errors.New(engine.MaskKeys(err.Error(), ch.Keys))
		}
		if seen == nil {
			return nil
		}
		// Anthropic's results name every request: those a translated
		// batch's vendor left unanswered (a cancel, an expiry) are canceled
		lines, ae := e.readLines(e.filePath(st.InputFileID), st.Dialect, st.Endpoint)
		if ae != nil {
			return errors.New(ae.Message)
		}
		for _, l := range lines {
			if seen[l.CustomID] {
				continue
			}
			r := &adapters.BatchResult{CustomID: l.CustomID, Status: http.StatusRequestTimeout, Error: "the batch ended before this request ran"}
			e.renderLine(d, st, r, l.CustomID, n, nil)
			n++
			if err := each(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// settleResults bills the results read calls each with, writes the output
// and error files and settles the batch.
func (e *Engine) settleResults(ctx context.Context, t *store.Task, st *batchState, read func(each func(*adapters.BatchResult) error) error) {
	out, err := e.newDerived()
	if err != nil {
		e.deps.Log.Error("writing a batch's output file", zap.Error(err))
		e.later(ctx, t, e.cfg.PollInterval)
		return
	}
	defer out.discard()
	errs, err := e.newDerived()
	if err != nil {
		e.deps.Log.Error("writing a batch's error file", zap.Error(err))
		e.later(ctx, t, e.cfg.PollInterval)
		return
	}
	defer errs.discard()
	now := time.Now()
	endpoint := st.path()
	var rows []*store.UsageLog
	st.Completed, st.Failed, st.Cancelled, st.InputTokens, st.OutputTokens = 0, 0, 0, 0, 0
	err = read(func(r *adapters.BatchResult) error {
		row := &store.UsageLog{Key: "batch:" + t.ID + ":" + r.CustomID, CreatedAt: now, Model: t.Model, Channel: t.Channel,
			Endpoint: endpoint, Status: r.Status, Error: r.Error, RequestID: t.RequestID, UpstreamRequestID: t.UpstreamID,
			LatencyMS: now.Sub(t.CreatedAt).Milliseconds()}
		switch {
		case r.Succeeded:
			u := billing.Clamp(r.Usage)
			row.PromptTokens, row.CompletionTokens, row.CachedTokens, row.ReasoningTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens
			row.Cost = st.Price.Cost(u)
			st.Completed++
			st.InputTokens += u.PromptTokens
			st.OutputTokens += u.CompletionTokens
		case r.Status == http.StatusRequestTimeout:
			st.Cancelled++
		default:
			st.Failed++
		}
		rows = append(rows, row)
		if r.ErrorLine {
			return errs.write(r.Line)
		}
		return out.write(r.Line)
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		e.deps.Log.Warn("reading a batch's results failed; trying again later", zap.String("batch_id", t.ID), zap.String("channel", t.Channel),
			zap.Error(err))
		e.later(ctx, t, e.backoff(t.Polls+1))
		return
	}
	expires := time.Time{}
	if e.cfg.FileRetention > 0 {
		expires = now.Add(e.cfg.FileRetention)
	}
	for _, d := range []struct {
		w    *derived
		what string
		dst  *string
	}{{out, "output", &st.OutputFileID}, {errs, "errors", &st.ErrorFileID}} {
		if d.w.lines == 0 && (d.what == "errors" || st.Dialect == DialectOpenAI && st.Completed == 0) {
			continue
		}
		f := &store.File{ID: derivedFileID(t.ID, d.what), UserID: t.UserID, Purpose: "batch_output",
			Filename: t.ID + "_" + d.what + ".jsonl", ExpiresAt: expires}
		if err := e.commit(ctx, d.w, f); err != nil {
			e.deps.Log.Error("writing a batch's "+d.what+" file; trying again later", zap.String("batch_id", t.ID), zap.Error(err))
			e.later(ctx, t, e.cfg.PollInterval)
			return
		}
		*d.dst = f.ID
	}
	// lines the vendor gave no result for (cut by a cancel) cost nothing
	st.Cancelled += max(st.Lines-st.Completed-st.Failed-st.Cancelled, 0)
	e.finishBatch(ctx, t, st, adapters.TaskFinished, "", rows)
}

// endBatch ends a batch no line of which was billed: refunded whole.
func (e *Engine) endBatch(ctx context.Context, t *store.Task, st *batchState, status, why string) {
	if status == adapters.TaskFinished {
		st.Cancelled = st.Lines - st.Completed - st.Failed
	} else {
		st.Failed = st.Lines
	}
	e.finishBatch(ctx, t, st, status, why, nil)
}

// finishBatch settles the batch once: rows charge each line's cost, the
// reservation comes back, in the store's one transaction.
func (e *Engine) finishBatch(ctx context.Context, t *store.Task, st *batchState, status, why string, rows []*store.UsageLog) {
	now := time.Now()
	st.EndedAt = now.Unix()
	st.Done = st.Completed + st.Failed + st.Cancelled
	t.Status, t.Error, t.Progress = status, why, 100
	st.save(t)
	var settled bool
	var err error
	if len(rows) > 0 {
		settled, err = e.deps.Store.FinishTaskRows(ctx, t, rows)
	} else {
		t.Cost = 0
		code := http.StatusOK
		if status == adapters.TaskFailed {
			code = http.StatusBadGateway
		}
		settled, err = e.deps.Store.FinishTask(ctx, t, &store.UsageLog{CreatedAt: now, Model: t.Model, Channel: t.Channel,
			Endpoint: st.path(), Status: code, Error: why, RequestID: t.RequestID, UpstreamRequestID: t.UpstreamID,
			LatencyMS: now.Sub(t.CreatedAt).Milliseconds()})
	}
	if err != nil {
		if ctx.Err() == nil {
			e.deps.Log.Warn("settling a batch; trying again at its next poll", zap.String("batch_id", t.ID), zap.Error(err))
			e.later(ctx, t, e.cfg.PollInterval)
		}
		return
	}
	if settled {
		e.deps.Engine.Gate.TaskSettled(t.UserID, t.TokenID, t.Plan, t.Windows, t.Reserved-t.Cost)
		e.taskCost(t)
		e.deps.Log.Info("batch settled", zap.String("batch_id", t.ID), zap.String("status", status), zap.Int64("lines", st.Lines),
			zap.Int64("completed", st.Completed), zap.Int64("failed", st.Failed), zap.Int64("cancelled", st.Cancelled),
			zap.Int64("cost", t.Cost), zap.Int64("refunded", t.Reserved-t.Cost))
	}
}

// path is the batch endpoint's path, its usage rows' endpoint.
func (st *batchState) path() string {
	if st.Dialect == DialectAnthropic {
		return "/v1/messages/batches"
	}
	return "/v1/batches"
}
