package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Gemini API batch mode: POST /v1beta/models/{model}:batchGenerateContent
// with the requests inline ({"batch": {"display_name", "input_config":
// {"requests": {"requests": [{"request", "metadata"}]}}}}), answered with
// an Operation named batches/{id}; GET /v1beta/batches/{id} until its
// GenerateContentBatch (the operation's metadata) is in a final state;
// POST /v1beta/batches/{id}:cancel. The answers come inline in the
// finished operation, in response.inlinedResponses.inlinedResponses (and
// in metadata.output.inlinedResponses), each with the metadata its request
// was sent with: the line's custom_id travels there as "key".
//
// No client speaks Gemini's batch wire to the gateway, so the batches it
// runs are the gateway's OpenAI and Anthropic batches of chat lines,
// translated as requests are (adapters.NeutralBatchProvider).

var _ adapters.NeutralBatchProvider = Adapter{}

// BatchDialect implements adapters.BatchProvider: none, the lines come
// translated.
func (Adapter) BatchDialect() string { return "" }

// BatchOp implements adapters.NeutralBatchProvider: generateContent's
// conversations (embeddings' asyncBatchEmbedContent is not used).
func (Adapter) BatchOp(op adapters.Operation) bool { return op == adapters.OpChat }

type inlinedRequest struct {
	Request  json.RawMessage   `json:"request"`
	Metadata map[string]string `json:"metadata"`
}

// MaxInlineBatch is the Gemini API's bound on a batch's inline requests
// (20 MB).
const MaxInlineBatch = 20_000_000

// batchKey is the member of a request's metadata that carries its line's
// custom_id.
const batchKey = "key"

// batchOperation is the Operation batches are answered with, without
// its answers (PollBatch reads it streaming, skipping them).
type batchOperation struct {
	Name  string       `json:"name"`
	Done  bool         `json:"done"`
	Error *errorDetail `json:"error"`
	State string       `json:"-"`
	Stats batchStats   `json:"-"`
}

// batchStats are a GenerateContentBatch's counts, int64s as JSON strings.
type batchStats struct {
	RequestCount           flexInt `json:"requestCount"`
	SuccessfulRequestCount flexInt `json:"successfulRequestCount"`
	FailedRequestCount     flexInt `json:"failedRequestCount"`
	PendingRequestCount    flexInt `json:"pendingRequestCount"`
}

// flexInt reads an int64 sent as a string (proto3 JSON) or a number.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("a count that is not an integer: %s", b)
	}
	*n = flexInt(v)
	return nil
}

func (a Adapter) batchRequest(ctx context.Context, up *adapters.Upstream, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(up.BaseURL, "/")+"/v1beta/"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	if up.Key != "" {
		hr.Header.Set("X-Goog-Api-Key", up.Key)
	}
	hr.Header.Set("Accept", "application/json")
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	return hr, nil
}

// batchPath is the path of the batch named id (batches/{id}), refusing a
// name that would lead elsewhere on the vendor's host.
func batchPath(id string) (string, error) {
	rest, ok := strings.CutPrefix(id, "batches/")
	if !ok || rest == "" || strings.ContainsAny(rest, "/?#:%") || rest == "." || rest == ".." {
		return "", fmt.Errorf("%q is not a Gemini batch name", id)
	}
	return id, nil
}

// SubmitBatch implements adapters.BatchProvider: the lines are encoded as
// generateContent requests, inline, on the model of their first line (a
// batch names one model).
func (a Adapter) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	if len(job.Lines) == 0 {
		return "", adapters.BadRequest("a batch needs at least one request")
	}
	reqs := make([]inlinedRequest, len(job.Lines))
	model := strings.TrimPrefix(up.Model, "models/")
	for i, l := range job.Lines {
		if l.Req == nil || !a.BatchOp(l.Req.Op) || l.Req.Chat == nil {
			return "", adapters.Unsupported("request %q of the batch cannot be sent to Gemini's batch mode: only chat requests are", l.CustomID)
		}
		if err := l.Req.Translatable(); err != nil {
			return "", err
		}
		if model == "" {
			model = strings.TrimPrefix(l.Req.Model, "models/")
		}
		body, err := EncodeRequest(ctx, l.Req)
		if err != nil {
			return "", fmt.Errorf("request %q of the batch: %w", l.CustomID, err)
		}
		reqs[i] = inlinedRequest{Request: body, Metadata: map[string]string{batchKey: l.CustomID}}
	}
	body, err := json.Marshal(map[string]any{"batch": map[string]any{
		"display_name": job.ID,
		"input_config": map[string]any{"requests": map[string]any{"requests": reqs}},
	}})
	if err != nil {
		return "", fmt.Errorf("encoding the batch: %w", err)
	}
	if len(body) > MaxInlineBatch {
		// Gemini's own bound on inline requests: said plainly here rather
		// than as the vendor's 400
		return "", adapters.BadRequest("the batch's requests take %d bytes as Gemini requests, more than the %d its batch mode takes inline: split the batch", len(body), MaxInlineBatch)
	}
	hr, err := a.batchRequest(ctx, up, http.MethodPost, "models/"+escapeModel(model)+":batchGenerateContent", body)
	if err != nil {
		return "", err
	}
	_, answer, err := adapters.TaskCallOK(do, up, hr, "creating the batch", DecodeError)
	if err != nil {
		return "", err
	}
	var op batchOperation
	if err := json.Unmarshal(answer, &op); err != nil {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Gemini's answer to the batch's creation is not the expected JSON: %v", err)
	}
	if _, err := batchPath(op.Name); err != nil {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Gemini's answer to the batch's creation names no batch: %v", err)
	}
	return op.Name, nil
}

func escapeModel(m string) string {
	return strings.ReplaceAll(strings.ReplaceAll(m, "/", "%2F"), "?", "%3F")
}

// getBatch GETs the batch's operation and hands its body to read.
func (a Adapter) getBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id, what string, read func(io.Reader) error) error {
	p, err := batchPath(id)
	if err != nil {
		return adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "%v", err)
	}
	hr, err := a.batchRequest(ctx, up, http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	resp, err := do.Do(hr)
	if err != nil {
		return adapters.TaskError(up, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, adapters.MaxTaskAnswer))
		if e := DecodeError(resp.StatusCode, body); e != nil {
			return e
		}
		return fmt.Errorf("channel %q: %s: the upstream answered %d", up.Channel, what, resp.StatusCode)
	}
	return read(resp.Body)
}

// PollBatch implements adapters.BatchProvider. A finished batch's
// operation carries every answer: it is read streaming, its answers
// skipped token by token, so a poll holds none of them.
func (a Adapter) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	var op batchOperation
	err := a.getBatch(ctx, do, up, id, "polling the batch", func(r io.Reader) error {
		return readOperation(json.NewDecoder(r), &op, nil)
	})
	if err != nil {
		return nil, err
	}
	s := op.Stats
	st := &adapters.BatchState{Total: int64(s.RequestCount), Done: int64(s.SuccessfulRequestCount + s.FailedRequestCount)}
	if st.Total > 0 && s.PendingRequestCount > 0 {
		st.Done = max(st.Done, st.Total-int64(s.PendingRequestCount))
	}
	switch op.State {
	case "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_UNSPECIFIED":
	case "BATCH_STATE_SUCCEEDED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED":
		st.Ended = true
	case "BATCH_STATE_FAILED":
		st.Ended, st.Failed, st.Error = true, true, "Gemini failed the batch"
		if op.Error != nil && op.Error.Message != "" {
			st.Error += ": " + op.Error.Message
		}
	case "":
		// no GenerateContentBatch in the metadata: the operation's own
		// done and error say it (a cancel ends it with code 1, CANCELLED)
		if op.Done {
			st.Ended = true
			if op.Error != nil && op.Error.Code != 1 {
				st.Failed, st.Error = true, "Gemini failed the batch: "+op.Error.Message
			}
		}
	default:
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Gemini reported the batch in the unknown state %q", op.State)
	}
	return st, nil
}

// CancelBatch implements adapters.BatchProvider.
func (a Adapter) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	p, err := batchPath(id)
	if err != nil {
		return adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "%v", err)
	}
	hr, err := a.batchRequest(ctx, up, http.MethodPost, p+":cancel", []byte("{}"))
	if err != nil {
		return err
	}
	_, _, err = adapters.TaskCallOK(do, up, hr, "cancelling the batch", DecodeError)
	return err
}

// inlinedResponse is one answer of a finished batch.
type inlinedResponse struct {
	Response json.RawMessage `json:"response"`
	Error    *errorDetail    `json:"error"`
	Metadata map[string]any  `json:"metadata"`
}

// BatchResults implements adapters.BatchProvider: the finished batch's
// operation, read streaming, each inlined answer decoded on its own and
// at most max bytes in all.
func (a Adapter) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, _ *adapters.BatchState, max int64, each func(*adapters.BatchResult) error) error {
	err := a.getBatch(ctx, do, up, id, "reading the batch's results", func(r io.Reader) error {
		lr := &io.LimitedReader{R: r, N: max + 1}
		var op batchOperation
		err := readOperation(json.NewDecoder(lr), &op, func(dec *json.Decoder) error {
			var ir inlinedResponse
			if err := dec.Decode(&ir); err != nil {
				return err
			}
			res, err := parseBatchResponse(&ir)
			if err != nil {
				return err
			}
			return each(res)
		})
		if lr.N <= 0 {
			return fmt.Errorf("more than %d bytes", max)
		}
		return err
	})
	if err != nil {
		var ae *adapters.Error
		if errors.As(err, &ae) {
			return err
		}
		return fmt.Errorf("channel %q: the batch's results: %w", up.Channel, err)
	}
	return nil
}

// parseBatchResponse reads one inlined answer of a batch.
func parseBatchResponse(ir *inlinedResponse) (*adapters.BatchResult, error) {
	key, _ := ir.Metadata[batchKey].(string)
	if key == "" {
		return nil, errors.New("an answer without the key its request was sent with")
	}
	r := &adapters.BatchResult{CustomID: key}
	switch {
	case ir.Error != nil:
		r.Status, r.Error = rpcStatus(ir.Error.Code), ir.Error.Message
		if r.Error == "" {
			r.Error = "the request failed"
		}
	case len(ir.Response) > 0 && string(ir.Response) != "null":
		resp, err := DecodeGenerateResponse(ir.Response)
		if err != nil {
			return nil, fmt.Errorf("the answer to %q: %w", key, err)
		}
		r.Succeeded, r.Status, r.Usage, r.Resp = true, http.StatusOK, resp.Usage, resp
	default:
		return nil, fmt.Errorf("the answer to %q has neither a response nor an error", key)
	}
	return r, nil
}

// rpcStatus is the HTTP status of a google.rpc code; a cancelled line is
// 408, as the batches count those.
func rpcStatus(code int) int {
	switch code {
	case 1: // CANCELLED
		return http.StatusRequestTimeout
	case 3, 9, 11: // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE
		return http.StatusBadRequest
	case 4: // DEADLINE_EXCEEDED
		return http.StatusGatewayTimeout
	case 5:
		return http.StatusNotFound
	case 7:
		return http.StatusForbidden
	case 8:
		return http.StatusTooManyRequests
	case 14:
		return http.StatusServiceUnavailable
	case 16:
		return http.StatusUnauthorized
	}
	if code >= 400 && code <= 599 {
		return code // an HTTP status where a code was expected
	}
	return http.StatusInternalServerError
}

// readOperation reads a batch's Operation from dec: its name, done, error,
// the GenerateContentBatch's state and stats, and, when answer is set,
// calls it on each inlined answer of the first list of them found (the
// operation's response, or the batch's output: the same answers).
func readOperation(dec *json.Decoder, op *batchOperation, answer func(*json.Decoder) error) error {
	found := false
	answers := func(dec *json.Decoder) error {
		// InlinedResponses: {"inlinedResponses": [...]}
		return readObject(dec, map[string]func(*json.Decoder) error{"inlinedResponses": func(dec *json.Decoder) error {
			if found || answer == nil {
				return skipValue(dec)
			}
			found = true
			return readArray(dec, answer)
		}})
	}
	output := func(dec *json.Decoder) error {
		return readObject(dec, map[string]func(*json.Decoder) error{"inlinedResponses": answers})
	}
	return readObject(dec, map[string]func(*json.Decoder) error{
		"name":  func(dec *json.Decoder) error { return dec.Decode(&op.Name) },
		"done":  func(dec *json.Decoder) error { return dec.Decode(&op.Done) },
		"error": func(dec *json.Decoder) error { return dec.Decode(&op.Error) },
		"metadata": func(dec *json.Decoder) error {
			return readObject(dec, map[string]func(*json.Decoder) error{
				"state":      func(dec *json.Decoder) error { return dec.Decode(&op.State) },
				"batchStats": func(dec *json.Decoder) error { return dec.Decode(&op.Stats) },
				"output":     output,
			})
		},
		"response": output,
	})
}

// readObject reads a JSON object (or null) member by member, calling the
// member's function on its value and skipping the other members'.
func readObject(dec *json.Decoder, members map[string]func(*json.Decoder) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("an object was expected, not %v", t)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if fn := members[key]; fn != nil {
			err = fn(dec)
		} else {
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// readArray reads a JSON array (or null), calling fn for each element.
func readArray(dec *json.Decoder, fn func(*json.Decoder) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("an array was expected, not %v", t)
	}
	for dec.More() {
		if err := fn(dec); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// skipValue reads past one value token by token, holding no more of it
// than its longest string.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
