package tasks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// A batch whose model has no channel with a batch API runs on the
// gateway's own request engine: the poller that leases it sends its lines
// over the model's channels (the same plan, failover and classification as
// a request), at most LocalConcurrency at once, and settles the batch from
// the answers as it would from a vendor's results. No line is billed until
// the batch settles, once; a batch cut short (a reload, a crash) is run
// again whole by whoever takes it up next, so its upstream may be asked
// twice for a line, never the user billed twice. Lines run at the batch
// price: the operator sets it for such models as they see fit.

// localPlan is the model's channels that answer requests.
func (e *Engine) localPlan(model string) []*routing.Channel {
	return e.deps.Engine.ChatChannels(model)
}

// localOps are the operations of the batch endpoints' lines.
var localOps = map[string]adapters.Operation{"/v1/chat/completions": adapters.OpChat, "/v1/embeddings": adapters.OpEmbedding,
	"/v1/responses": adapters.OpResponses, "/v1/messages": adapters.OpChat}

// runLocal runs a leased local batch's lines and settles it.
func (e *Engine) runLocal(ctx context.Context, t *store.Task, st *batchState) {
	lines, ae := e.readLines(e.filePath(st.InputFileID), st.Dialect, st.Endpoint)
	if ae != nil {
		e.endBatch(ctx, t, st, adapters.TaskFailed, "the batch's input could not be read: "+ae.Message)
		return
	}
	d := e.deps.Dialect(st.Dialect)
	if d == nil {
		e.endBatch(ctx, t, st, adapters.TaskFailed, "the gateway no longer speaks this batch's dialect")
		return
	}
	if st.CancelRequestedAt != 0 {
		e.endBatch(ctx, t, st, adapters.TaskFinished, "")
		return
	}
	t.Status, t.Channel = adapters.TaskRunning, "local"
	if st.InProgressAt == 0 {
		st.InProgressAt = time.Now().Unix()
	}
	// the answers are spooled to disk as they come, not held in memory
	spool, err := e.newDerived()
	if err != nil {
		e.deps.Log.Error("spooling a local batch's answers", zap.Error(err))
		e.later(ctx, t, e.cfg.PollInterval)
		return
	}
	defer spool.discard()
	var mu sync.Mutex
	var spoolErr error
	sem := make(chan struct{}, e.cfg.LocalConcurrency)
	var wg sync.WaitGroup
	for i, l := range lines {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b, _ := json.Marshal(e.runLine(ctx, d, st, t.Model, l, i))
			mu.Lock()
			defer mu.Unlock()
			if err := spool.write(b); err != nil && spoolErr == nil {
				spoolErr = err
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: the next configuration runs it again
	}
	if spoolErr == nil {
		_, spoolErr = spool.tmp.Seek(0, io.SeekStart)
	}
	if spoolErr != nil {
		e.deps.Log.Error("spooling a local batch's answers; running it again later", zap.String("batch_id", t.ID), zap.Error(spoolErr))
		e.later(ctx, t, e.cfg.PollInterval)
		return
	}
	e.settleResults(ctx, t, st, func(each func(*adapters.BatchResult) error) error {
		return adapters.EachLine(spool.tmp, e.cfg.MaxBatchResults, func(line []byte) error {
			var r adapters.BatchResult
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			return each(&r)
		})
	})
}

// answer is an http.ResponseWriter that keeps a line's answer.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.header }
func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}
func (a *answer) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(p)
}

// runLine sends one line through the request engine and returns it as a
// result line of the batch's dialect.
func (e *Engine) runLine(ctx context.Context, d adapters.Dialect, st *batchState, model string, l adapters.BatchLine, n int) *adapters.BatchResult {
	res := &adapters.BatchResult{CustomID: l.CustomID}
	w := &answer{header: http.Header{}}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, st.Endpoint, bytes.NewReader(l.Body))
	if err == nil {
		hr.Header.Set("Content-Type", "application/json")
		if st.Dialect == DialectAnthropic {
			hr.Header.Set("Anthropic-Version", "2023-06-01")
		}
		var req *adapters.Request
		if req, err = d.DecodeRequest(localOps[st.Endpoint], l.Body, hr); err == nil {
			req.Stream = false // a batch line is answered whole
			x := &engine.Exchange{W: w, R: hr, Dialect: d, Req: req, Start: time.Now()}
			plan := e.localPlan(model)
			_ = e.deps.Engine.Serve(x, plan)
			res.Usage, res.Status = x.Usage, x.Status
			if x.Status == 0 {
				res.Status = w.status
			}
			res.Error = x.ErrMsg
		}
	}
	if err != nil {
		ae := engine.AsError(err)
		_ = engine.WriteError(w, d, ae)
		res.Status, res.Error = ae.Status, ae.Message
	}
	res.Succeeded = res.Status >= 200 && res.Status <= 299
	e.renderLine(d, st, res, l.CustomID, n, bytes.TrimSpace(w.body.Bytes()))
	if !res.Succeeded {
		e.deps.Log.Debug("a local batch line failed", zap.String("custom_id", l.CustomID), zap.Int("status", res.Status))
	}
	return res
}

// renderLine sets res.Line: the result line of the batch's dialect with
// body as the answer's body, or, with no body, res.Resp (or res.Error)
// rendered in d, as a translated request's answer is.
func (e *Engine) renderLine(d adapters.Dialect, st *batchState, res *adapters.BatchResult, customID string, n int, body []byte) {
	rendered := body == nil
	if rendered {
		var err error
		if res.Succeeded && res.Resp != nil {
			req := &adapters.Request{Op: localOps[st.Endpoint], Model: res.Resp.Model, Chat: &adapters.ChatRequest{}}
			if body, err = d.EncodeResponse(req, res.Resp); err != nil {
				res.Succeeded, res.Status, res.Error = false, http.StatusBadGateway, "the answer could not be rendered: "+err.Error()
			}
		}
		if !res.Succeeded {
			status := cmp.Or(res.Status, http.StatusBadGateway)
			body = d.EncodeError(&adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status), Message: res.Error})
		}
	}
	if !json.Valid(body) {
		body = []byte("null")
	}
	var line any
	switch {
	case st.Dialect == DialectAnthropic && res.Succeeded:
		line = map[string]any{"custom_id": customID, "result": map[string]any{"type": "succeeded", "message": json.RawMessage(body)}}
	case st.Dialect == DialectAnthropic && rendered && res.Status == http.StatusRequestTimeout:
		line = map[string]any{"custom_id": customID, "result": map[string]any{"type": "canceled"}}
	case st.Dialect == DialectAnthropic:
		line = map[string]any{"custom_id": customID, "result": map[string]any{"type": "errored", "error": json.RawMessage(body)}}
	default:
		res.ErrorLine = !res.Succeeded
		line = map[string]any{"id": fmt.Sprintf("batch_req_%d", n), "custom_id": customID,
			"response": map[string]any{"status_code": res.Status, "body": json.RawMessage(body)}, "error": nil}
	}
	res.Line, _ = json.Marshal(line)
}

// decodeLine decodes a batch's line from its dialect, as a request to
// the endpoint is, for a provider that takes it translated.
func (e *Engine) decodeLine(ctx context.Context, st *batchState, l adapters.BatchLine) (*adapters.Request, *adapters.Error) {
	var d adapters.Dialect
	if e.deps.Dialect != nil {
		d = e.deps.Dialect(st.Dialect)
	}
	if d == nil {
		return nil, adapters.BadRequest("the gateway no longer speaks this batch's dialect")
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, st.Endpoint, bytes.NewReader(l.Body))
	if err != nil {
		return nil, engine.AsError(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if st.Dialect == DialectAnthropic {
		hr.Header.Set("Anthropic-Version", "2023-06-01")
	}
	req, err := d.DecodeRequest(localOps[st.Endpoint], l.Body, hr)
	if err != nil {
		ae := engine.AsError(err)
		ae.Message = fmt.Sprintf("request %q of the batch: %s", l.CustomID, ae.Message)
		return nil, ae
	}
	req.Stream = false // a batch line is answered whole
	return req, nil
}
