package anthropic

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Anthropic's Message Batches: POST /v1/messages/batches with the requests
// inline ({"requests": [{"custom_id", "params"}]}), GET
// /v1/messages/batches/{id} until processing_status is "ended", then GET
// /v1/messages/batches/{id}/results: JSONL, each line {"custom_id",
// "result": {"type": "succeeded"|"errored"|"canceled"|"expired", ...}}.

var _ adapters.BatchProvider = Adapter{}

// BatchDialect implements adapters.BatchProvider.
func (Adapter) BatchDialect() string { return "anthropic" }

type batchRequest struct {
	CustomID string          `json:"custom_id"`
	Params   json.RawMessage `json:"params"`
}

type messageBatch struct {
	ID               string `json:"id"`
	ProcessingStatus string `json:"processing_status"`
	RequestCounts    struct {
		Processing, Succeeded, Errored, Canceled, Expired int64
	} `json:"request_counts"`
}

func (a Adapter) batchCall(ctx context.Context, do adapters.Doer, up *adapters.Upstream, method, path string, body []byte, what string, dst any) error {
	var hr *http.Request
	var err error
	if body != nil {
		hr, err = http.NewRequestWithContext(ctx, method, strings.TrimRight(up.BaseURL, "/")+path, bytes.NewReader(body))
	} else {
		hr, err = http.NewRequestWithContext(ctx, method, strings.TrimRight(up.BaseURL, "/")+path, nil)
	}
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	a.batchHeaders(hr, up)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	_, answer, err := adapters.TaskCallOK(do, up, hr, what, DecodeError)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(answer, dst); err != nil {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Anthropic's answer to %s is not the expected JSON: %v", what, err)
	}
	return nil
}

func (a Adapter) batchHeaders(hr *http.Request, up *adapters.Upstream) {
	if up.Key != "" {
		hr.Header.Set("X-Api-Key", up.Key)
	}
	hr.Header.Set("Anthropic-Version", cmp.Or(a.Version, DefaultVersion))
	hr.Header.Set("Accept", "application/json")
}

// SubmitBatch implements adapters.BatchProvider.
func (a Adapter) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	reqs := make([]batchRequest, len(job.Lines))
	for i, l := range job.Lines {
		reqs[i] = batchRequest{CustomID: l.CustomID, Params: l.Body}
	}
	body, err := json.Marshal(map[string]any{"requests": reqs})
	if err != nil {
		return "", fmt.Errorf("encoding the batch: %w", err)
	}
	var b messageBatch
	if err := a.batchCall(ctx, do, up, http.MethodPost, "/v1/messages/batches", body, "creating the message batch", &b); err != nil {
		return "", err
	}
	if b.ID == "" {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Anthropic's answer to the batch's creation has no id")
	}
	return b.ID, nil
}

// PollBatch implements adapters.BatchProvider.
func (a Adapter) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	var b messageBatch
	if err := a.batchCall(ctx, do, up, http.MethodGet, "/v1/messages/batches/"+url.PathEscape(id), nil, "polling the message batch", &b); err != nil {
		return nil, err
	}
	c := b.RequestCounts
	st := &adapters.BatchState{Done: c.Succeeded + c.Errored + c.Canceled + c.Expired}
	st.Total = st.Done + c.Processing
	switch b.ProcessingStatus {
	case "in_progress":
	case "canceling":
		st.Cancelling = true
	case "ended":
		st.Ended = true
	default:
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Anthropic reported the message batch in the unknown status %q", b.ProcessingStatus)
	}
	return st, nil
}

// CancelBatch implements adapters.BatchProvider.
func (a Adapter) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	var b messageBatch
	return a.batchCall(ctx, do, up, http.MethodPost, "/v1/messages/batches/"+url.PathEscape(id)+"/cancel", nil, "cancelling the message batch", &b)
}

type resultLine struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string `json:"type"`
		Message *struct {
			Usage *usage `json:"usage"`
		} `json:"message"`
		Error *struct {
			Error *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"error"`
	} `json:"result"`
}

// ParseBatchResult reads one line of a message batch's results.
func ParseBatchResult(line []byte) (*adapters.BatchResult, error) {
	var l resultLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("a result line is not JSON: %w", err)
	}
	r := &adapters.BatchResult{CustomID: l.CustomID, Line: line}
	switch l.Result.Type {
	case "succeeded":
		r.Succeeded, r.Status = true, http.StatusOK
		if l.Result.Message != nil && l.Result.Message.Usage != nil {
			r.Usage = usageFromWire(l.Result.Message.Usage)
		}
	case "errored":
		r.Status, r.Error = http.StatusBadRequest, "the request failed"
		if e := l.Result.Error; e != nil && e.Error != nil {
			r.Error = e.Error.Type + ": " + e.Error.Message
			if e.Error.Type == "api_error" || e.Error.Type == "overloaded_error" {
				r.Status = http.StatusInternalServerError
			}
		}
	case "canceled", "expired":
		r.Status, r.Error = http.StatusRequestTimeout, "the request was "+l.Result.Type+" before it ran"
	default:
		return nil, fmt.Errorf("a result line of the unknown type %q", l.Result.Type)
	}
	return r, nil
}

// BatchResults implements adapters.BatchProvider: the results endpoint,
// on the channel's own base URL (the batch's results_url is not followed,
// so the key goes nowhere else).
func (a Adapter) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, _ *adapters.BatchState, max int64, each func(*adapters.BatchResult) error) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(up.BaseURL, "/")+"/v1/messages/batches/"+url.PathEscape(id)+"/results", nil)
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	a.batchHeaders(hr, up)
	hr.Header.Set("Accept", "application/x-jsonl")
	resp, err := do.Do(hr)
	if err != nil {
		return adapters.TaskError(up, "reading the batch's results", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "channel %q: reading the batch's results: the upstream answered %d", up.Channel, resp.StatusCode)
	}
	err = adapters.EachLine(resp.Body, max, func(line []byte) error {
		r, err := ParseBatchResult(line)
		if err != nil {
			return err
		}
		r.Line = bytes.Clone(line)
		return each(r)
	})
	if err != nil {
		return fmt.Errorf("channel %q: the batch's results: %w", up.Channel, err)
	}
	return nil
}
