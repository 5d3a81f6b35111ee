package tasks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Batches (OpenAI's /v1/batches, Anthropic's /v1/messages/batches) are
// tasks of their own kind: a row of the tasks table whose id starts with
// BatchPrefix, so they share the tasks' leases, poller, reloads and
// restarts, and their money lives in the store from creation (the
// worst case of every line at the batch price) to the one transaction
// that settles them, with a usage row per line. The batch's own state
// (its dialect, lines, prices, counts, files) is the task's Result.
//
// A batch runs on its vendor's batch API: an OpenAI batch on a channel
// whose family is an adapters.BatchProvider of the openai dialect, an
// Anthropic one on Anthropic's; either, for a model of a channel whose
// batch API takes neutral requests (Gemini's batch mode), on that one, its
// lines translated and its answers rendered back. The poller submits it (upload, create),
// follows it, and settles it from the vendor's results line by line.

// BatchPrefix starts every batch id.
const BatchPrefix = "batch_"

// The batch dialects.
const (
	DialectOpenAI    = "openai"
	DialectAnthropic = "anthropic"
)

// BatchEndpoints are the paths an OpenAI batch's lines may call.
var BatchEndpoints = []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"}

// batchState is a batch's own state, kept as its task's Result.
type batchState struct {
	Dialect          string            `json:"dialect"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Lines            int64             `json:"lines"`
	// Local: no channel of the model has a batch API; the poller runs the
	// lines through the gateway's own engine (batchlocal.go).
	Local bool `json:"local,omitempty"`
	// Price is the model's batch price when the batch was created, which
	// settles every line.
	Price billing.Price `json:"price"`

	CancelRequestedAt int64 `json:"cancel_requested_at,omitempty"`
	CancelSent        bool  `json:"cancel_sent,omitempty"`
	InProgressAt      int64 `json:"in_progress_at,omitempty"`
	EndedAt           int64 `json:"ended_at,omitempty"`

	Done         int64  `json:"done,omitempty"`
	Completed    int64  `json:"completed,omitempty"`
	Failed       int64  `json:"failed,omitempty"`
	Cancelled    int64  `json:"cancelled,omitempty"`
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
}

func readState(t *store.Task) *batchState {
	var st batchState
	_ = json.Unmarshal([]byte(t.Result), &st)
	return &st
}

func (st *batchState) save(t *store.Task) {
	b, _ := json.Marshal(st)
	t.Result = string(b)
}

// IsBatch reports whether a task id is a batch's.
func IsBatch(id string) bool { return strings.HasPrefix(id, BatchPrefix) }

// newBatchID is batch_ and 130 random bits.
func newBatchID() string {
	var b [17]byte
	_, _ = rand.Read(b[:])
	return BatchPrefix + strings.ToLower(b32.EncodeToString(b[:]))[:26]
}

// BatchRequest is a batch to create, as the handler decoded it.
type BatchRequest struct {
	Identity *keys.Identity
	Dialect  string
	// OpenAI: the uploaded input file and the lines' endpoint.
	InputFileID, Endpoint, CompletionWindow string
	Metadata                                map[string]string
	// Anthropic: the requests, inline (custom_id, params).
	Lines     []adapters.BatchLine
	RequestID string
	Start     time.Time
	Header    http.Header
}

// inputLine is a line of an OpenAI batch's input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// anthropicLine is how an Anthropic batch's requests are kept on disk.
type anthropicLine struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

// lineFields are the members of a line's body the gateway reads: the
// model, and the output limits that bound its reservation.
type lineFields struct {
	Model               string `json:"model"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	MaxOutputTokens     *int64 `json:"max_output_tokens"`
	N                   *int64 `json:"n"`
}

// readLines reads a batch's input file: OpenAI lines checked against the
// endpoint, or the Anthropic requests the gateway kept.
func (e *Engine) readLines(path, dialect, endpoint string) ([]adapters.BatchLine, *adapters.Error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unavailable()
	}
	defer f.Close()
	var lines []adapters.BatchLine
	n := 0
	err = adapters.EachLine(f, e.cfg.MaxBatchFile, func(raw []byte) error {
		n++
		if len(lines) >= e.cfg.MaxBatchLines {
			return tooManyLines(e.cfg.MaxBatchLines)
		}
		if dialect == DialectAnthropic {
			var l anthropicLine
			if err := json.Unmarshal(raw, &l); err != nil {
				return adapters.BadRequest("line %d of the batch is not JSON: %v", n, err)
			}
			lines = append(lines, adapters.BatchLine{CustomID: l.CustomID, Body: l.Params})
			return nil
		}
		var l inputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return adapters.BadRequest("line %d of the input file is not a JSON object: %v", n, err)
		}
		if l.Method != http.MethodPost {
			return adapters.BadRequest("line %d of the input file has method %q: batch lines are POST", n, l.Method)
		}
		if l.URL != endpoint {
			return adapters.BadRequest("line %d of the input file calls %q, but the batch's endpoint is %s: every line calls the batch's endpoint", n, l.URL, endpoint)
		}
		lines = append(lines, adapters.BatchLine{CustomID: l.CustomID, Body: l.Body})
		return nil
	})
	if err != nil {
		var ae *adapters.Error
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, adapters.BadRequest("the input file cannot be read as JSON lines: %v", err)
	}
	return lines, nil
}

func tooManyLines(max int) *adapters.Error {
	ae := adapters.BadRequest("the batch has more than %d requests, the most a batch takes on this gateway (batches max_lines): split it into several batches", max)
	ae.Code = "too_many_lines"
	return ae
}

// checkLines checks every line has a unique custom_id, a JSON object body
// and the one model, and returns that model and the lines' worst case at
// the batch price.
func (e *Engine) checkLines(lines []adapters.BatchLine, endpoint string) (string, []lineFields, *adapters.Error) {
	if len(lines) == 0 {
		return "", nil, adapters.BadRequest("the batch has no requests")
	}
	seen := make(map[string]struct{}, len(lines))
	fields := make([]lineFields, len(lines))
	model := ""
	for i, l := range lines {
		if l.CustomID == "" {
			return "", nil, adapters.BadRequest("request %d of the batch has no custom_id: give each a unique one, to match it with its result", i+1)
		}
		if _, dup := seen[l.CustomID]; dup {
			return "", nil, adapters.BadRequest("the custom_id %q is used twice: each request of a batch needs its own", l.CustomID)
		}
		seen[l.CustomID] = struct{}{}
		if t := bytes.TrimSpace(l.Body); len(t) == 0 || t[0] != '{' {
			return "", nil, adapters.BadRequest("request %q of the batch has no JSON object body", l.CustomID)
		}
		if err := json.Unmarshal(l.Body, &fields[i]); err != nil || fields[i].Model == "" {
			return "", nil, adapters.BadRequest("request %q of the batch names no model: every request needs 'model'", l.CustomID)
		}
		if model == "" {
			model = fields[i].Model
		} else if fields[i].Model != model {
			return "", nil, adapters.BadRequest("request %q asks for model %q but the batch's first asks for %q: a batch runs one model, so split it by model", l.CustomID, fields[i].Model, model)
		}
	}
	return model, fields, nil
}

// reservation is the worst case of the lines at the batch price: each
// line's prompt estimated from its size (about four bytes a token) and
// its output limit (max_tokens, max_completion_tokens or
// max_output_tokens, times n; the model's max_output, or the gateway's
// default, when it names none). Embeddings have no output.
func (e *Engine) reservation(lines []adapters.BatchLine, fields []lineFields, price *billing.Price, endpoint string) int64 {
	var total int64
	for i, l := range lines {
		prompt := int64(len(l.Body)) / 4
		var out int64
		if endpoint != "/v1/embeddings" {
			f := fields[i]
			switch {
			case f.MaxCompletionTokens != nil && *f.MaxCompletionTokens > 0:
				out = *f.MaxCompletionTokens
			case f.MaxTokens != nil && *f.MaxTokens > 0:
				out = *f.MaxTokens
			case f.MaxOutputTokens != nil && *f.MaxOutputTokens > 0:
				out = *f.MaxOutputTokens
			case price.MaxOutput > 0:
				out = price.MaxOutput
			default:
				out = e.deps.Engine.DefaultMaxTokens
			}
			if f.N != nil && *f.N > 1 {
				out = billing.MulSat(out, min(*f.N, engine.MaxChoices))
			}
		}
		total = billing.AddSat(total, price.Reservation(prompt, out))
	}
	return total
}

// batchPlan is the model's channels that run batches of the dialect: a
// batch API of that dialect, or one that takes the lines translated
// (adapters.NeutralBatchProvider) for the endpoint's operation; and of
// lines lines, for a family that takes only some (adapters.BatchTaker).
func (e *Engine) batchPlan(model, dialect, endpoint string, lines int) []*routing.Channel {
	return e.deps.Engine.BatchChannels(model, func(ch *routing.Channel, bp adapters.BatchProvider) bool {
		if bt, some := bp.(adapters.BatchTaker); some && !bt.TakesBatch(ch.UpstreamModel(model), lines) {
			return false
		}
		if nb, ok := bp.(adapters.NeutralBatchProvider); ok {
			return nb.BatchOp(localOps[endpoint]) && e.deps.Dialect != nil && e.deps.Dialect(dialect) != nil
		}
		return bp.BatchDialect() == dialect
	})
}

// translatedPlan reports whether a channel of plan takes its batches'
// lines translated (adapters.NeutralBatchProvider).
func (e *Engine) translatedPlan(plan []*routing.Channel) bool {
	for _, rc := range plan {
		if up := e.deps.Engine.Upstreams.Get(rc.Name); up != nil {
			if _, ok := up.Provider.(adapters.NeutralBatchProvider); ok {
				return true
			}
		}
	}
	return false
}

// CreateBatch checks a batch, reserves the worst case of its lines at
// the batch price and stores it for the poller to start at the vendor.
func (e *Engine) CreateBatch(ctx context.Context, req BatchRequest) (*store.Task, *adapters.Error) {
	id := req.Identity
	eng := e.deps.Engine
	endpoint := "/v1/messages"
	st := &batchState{Dialect: req.Dialect, CompletionWindow: req.CompletionWindow, Metadata: req.Metadata}
	var lines []adapters.BatchLine
	if req.Dialect == DialectOpenAI {
		endpoint = req.Endpoint
		f, ae := e.File(ctx, id.User.ID, req.InputFileID)
		if ae != nil {
			return nil, ae
		}
		if f.Purpose != "batch" {
			return nil, adapters.BadRequest("the file %s has purpose %q: a batch's input file is uploaded with purpose \"batch\"", f.ID, f.Purpose)
		}
		if f.Lines > int64(e.cfg.MaxBatchLines) {
			return nil, tooManyLines(e.cfg.MaxBatchLines)
		}
		st.InputFileID = f.ID
		if lines, ae = e.readLines(e.filePath(f.ID), req.Dialect, endpoint); ae != nil {
			return nil, ae
		}
	} else {
		lines = req.Lines
		if len(lines) > e.cfg.MaxBatchLines {
			return nil, tooManyLines(e.cfg.MaxBatchLines)
		}
	}
	st.Endpoint = endpoint
	model, fields, ae := e.checkLines(lines, endpoint)
	if ae != nil {
		return nil, ae
	}
	if ae := engine.ModelAllowed(eng.Gate.Models(), id.Token, model); ae != nil {
		return nil, ae
	}
	if !eng.Channels.Has(model) {
		return nil, engine.UnknownModel(model)
	}
	price, ok := eng.Prices.Get(model)
	if !ok {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "model_price_missing",
			Message: "the model " + model + " has no price configured, so it cannot be billed: the operator must add 'price " + model + " { ... }' in the gateway's Caddyfile"}
	}
	plan := e.batchPlan(model, req.Dialect, endpoint, len(lines))
	if len(plan) == 0 {
		st.Local = len(e.localPlan(model)) > 0 && e.deps.Dialect != nil && e.deps.Dialect(req.Dialect) != nil
	}
	if len(plan) == 0 && !st.Local {
		return nil, &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "batches_unsupported",
			Message: "no channel serving the model " + model + " runs " + req.Dialect + " batches (a vendor batch API of that dialect): send the requests one by one instead"}
	}
	if e.translatedPlan(plan) {
		// lines that go translated are decoded now, so one the dialect
		// refuses is the caller's 400, before anything is reserved,
		// rather than the whole batch failing at the vendor later
		for _, l := range lines {
			if _, ae := e.decodeLine(ctx, st, l); ae != nil {
				return nil, ae
			}
		}
	}
	bp := price.Batch()
	if bp != nil {
		st.Price = *bp
	}
	st.Lines = int64(len(lines))
	amount := e.reservation(lines, fields, &st.Price, endpoint)

	if req.Dialect == DialectAnthropic {
		// the requests are kept on disk for the poller, as a file of the user's
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, l := range lines {
			_ = enc.Encode(anthropicLine{CustomID: l.CustomID, Params: l.Body})
		}
		f, ae := e.SaveFile(ctx, Upload{UserID: id.User.ID, Purpose: "message_batch", Filename: "message_batch.jsonl", Body: &buf})
		if ae != nil {
			return nil, ae
		}
		st.InputFileID = f.ID
	}

	ad, err := eng.Gate.Admit(time.Now(), billing.Ask{User: id.User, Token: id.Token, Rate: billing.RateRequest,
		Reserve: billing.Reserve(amount), Model: model})
	if err != nil {
		eng.Gate.Settle(time.Now(), ad, 0, 0)
		return nil, engine.AdmissionError(err, req.Header, "batch (its requests may cost up to %s at the batch price): top up your account, set max_tokens on its requests, split it, or ask for a key with a higher limit")
	}
	defer func() { eng.Gate.Settle(time.Now(), ad, 0, 0) }()
	stored := time.Now()
	t := &store.Task{ID: newBatchID(), UserID: id.User.ID, TokenID: id.Token.ID, Model: model,
		Reserved: amount, RequestID: req.RequestID, NextPollAt: stored,
		Windows: ad.Hold.Windows.IDsAt(stored), Plan: ad.Hold.Windows.PaidBy()}
	st.save(t)
	if err := e.deps.Store.CreateTask(ctx, t); err != nil {
		e.deps.Log.Error("storing a batch", zap.Error(err))
		return nil, unavailable()
	}
	eng.Gate.Ledger.Debited(ad.Hold, stored)
	ad.Hold = billing.Hold{}
	return t, nil
}

// BatchNotFound is the answer for a batch that does not exist and for
// someone else's alike.
func BatchNotFound(id string) *adapters.Error {
	e := adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "No batch found with id '%s'", id)
	e.Code = "batch_not_found"
	return e
}

// Batch returns the user's batch id.
func (e *Engine) Batch(ctx context.Context, userID int64, id string) (*store.Task, *adapters.Error) {
	if !IsBatch(id) {
		return nil, BatchNotFound(id)
	}
	t, err := e.deps.Store.TaskByID(ctx, id)
	if err != nil || t.UserID != userID {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.deps.Log.Error("reading a batch", zap.Error(err))
			return nil, unavailable()
		}
		return nil, BatchNotFound(id)
	}
	return t, nil
}

// Batches lists the user's batches, newest first.
func (e *Engine) Batches(ctx context.Context, userID int64, after string, limit int) ([]*store.Task, *adapters.Error) {
	ts, err := e.deps.Store.UserTasks(ctx, userID, BatchPrefix, after, limit)
	if err != nil {
		e.deps.Log.Error("listing batches", zap.Error(err))
		return nil, unavailable()
	}
	return ts, nil
}

// CancelBatch asks for the user's batch to stop: the vendor is told at
// once when the batch is there, the lines it finished are billed, the
// rest refunded when it ends. A batch not yet at the vendor ends now,
// refunded whole.
func (e *Engine) CancelBatch(ctx context.Context, userID int64, id string) (*store.Task, *adapters.Error) {
	if _, ae := e.Batch(ctx, userID, id); ae != nil {
		return nil, ae
	}
	owner := e.owner + "/cancel"
	deadline := time.Now().Add(refreshTimeout)
	for {
		t, err := e.deps.Store.LeaseTask(ctx, id, owner, time.Now().Add(e.cfg.Lease))
		if err == nil {
			return e.cancelLeased(ctx, t)
		}
		fresh, ae := e.Batch(ctx, userID, id)
		if ae != nil {
			return nil, ae
		}
		if !fresh.FinishedAt.IsZero() {
			return fresh, nil // ended already: nothing to cancel
		}
		if time.Now().After(deadline) {
			return nil, adapters.Errorf(http.StatusConflict, adapters.ErrInvalidRequest, "the batch is being updated; try the cancel again in a moment")
		}
		select {
		case <-ctx.Done():
			return nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the cancel was interrupted")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *Engine) cancelLeased(ctx context.Context, t *store.Task) (*store.Task, *adapters.Error) {
	ctx = context.WithoutCancel(ctx)
	st := readState(t)
	if st.CancelRequestedAt == 0 {
		st.CancelRequestedAt = time.Now().Unix()
	}
	if t.UpstreamID == "" {
		st.save(t)
		e.endBatch(ctx, t, st, adapters.TaskFinished, "")
		fresh, err := e.deps.Store.TaskByID(ctx, t.ID)
		if err != nil {
			return t, nil
		}
		return fresh, nil
	}
	e.sendCancel(ctx, t, st)
	st.save(t)
	t.NextPollAt = time.Now()
	if err := e.deps.Store.UpdateTask(ctx, t); err != nil {
		e.deps.Log.Warn("saving a batch's cancel", zap.String("batch_id", t.ID), zap.Error(err))
	}
	return t, nil
}

// sendCancel tells the vendor to cancel, once; a failure is tried again
// at the next poll.
func (e *Engine) sendCancel(ctx context.Context, t *store.Task, st *batchState) {
	if st.CancelSent {
		return
	}
	ch := e.channel(t.Channel)
	if ch == nil {
		return
	}
	bp, ok := ch.Provider.(adapters.BatchProvider)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.PollTimeout)
	defer cancel()
	if err := bp.CancelBatch(cctx, ch.doer(), ch.upstream(t.Model), t.UpstreamID); err != nil {
		e.deps.Log.Warn("cancelling a batch at the vendor; trying again at its next poll", zap.String("batch_id", t.ID), zap.String("error", engine.MaskKeys(err.Error(), ch.Keys)))
		return
	}
	st.CancelSent = true
}
