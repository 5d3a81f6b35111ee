package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// OpenAI's Batch API: the lines are uploaded as a JSONL file of purpose
// batch (POST /v1/files), run by POST /v1/batches, followed by GET
// /v1/batches/{id}, and read back from the output and error files (GET
// /v1/files/{id}/content), each line {"id", "custom_id", "response":
// {"status_code", "request_id", "body"}, "error"}.

var _ adapters.BatchProvider = Adapter{}

// BatchDialect implements adapters.BatchProvider.
func (Adapter) BatchDialect() string { return "openai" }

// batchInputLine is a line of a batch's input file.
type batchInputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// vendorBatch is the part of OpenAI's batch object the gateway reads.
type vendorBatch struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	OutputFileID  string `json:"output_file_id"`
	ErrorFileID   string `json:"error_file_id"`
	RequestCounts struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"data"`
	} `json:"errors"`
}

// BatchSite is where a vendor of OpenAI's batch wire keeps its files
// and batches: OpenAI at {base_url}/v1/..., with a Bearer key; Azure
// OpenAI at {base_url}/openai/...?api-version=..., with an api-key
// header and lines addressed without /v1.
type BatchSite struct {
	// URL is the address of path (/files, /batches/{id}, ...).
	URL func(up *adapters.Upstream, path string) string
	// Auth puts the channel's key on a request.
	Auth func(hr *http.Request, up *adapters.Upstream)
	// Endpoint is the lines' url and the batch's endpoint for one of
	// the gateway's batch endpoints (/v1/chat/completions, ...).
	Endpoint func(endpoint string) string
}

// openAISite is OpenAI's own.
var openAISite = BatchSite{
	URL: func(up *adapters.Upstream, path string) string {
		return strings.TrimRight(up.BaseURL, "/") + "/v1" + path
	},
	Auth: func(hr *http.Request, up *adapters.Upstream) {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	},
	Endpoint: func(endpoint string) string { return endpoint },
}

// call sends one JSON call with the channel's key and decodes the
// answer into dst.
func (site BatchSite) call(ctx context.Context, do adapters.Doer, up *adapters.Upstream, method, path, contentType string, body []byte, what string, dst any) error {
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var hr *http.Request
	var err error
	if rd != nil {
		hr, err = http.NewRequestWithContext(ctx, method, site.URL(up, path), rd)
	} else {
		hr, err = http.NewRequestWithContext(ctx, method, site.URL(up, path), nil)
	}
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	site.Auth(hr, up)
	hr.Header.Set("Accept", "application/json")
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	_, answer, err := adapters.TaskCallOK(do, up, hr, what, DecodeError)
	if err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(answer, dst); err != nil {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream's answer to %s is not the expected JSON: %v", what, err)
	}
	return nil
}

// SubmitBatch implements adapters.BatchProvider.
func (Adapter) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	return openAISite.SubmitBatch(ctx, do, up, job)
}

// PollBatch implements adapters.BatchProvider.
func (Adapter) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	return openAISite.PollBatch(ctx, do, up, id)
}

// CancelBatch implements adapters.BatchProvider.
func (Adapter) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	return openAISite.CancelBatch(ctx, do, up, id)
}

// BatchResults implements adapters.BatchProvider.
func (Adapter) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, st *adapters.BatchState, max int64, each func(*adapters.BatchResult) error) error {
	return openAISite.BatchResults(ctx, do, up, id, st, max, each)
}

// SubmitBatch uploads the lines, then starts the batch with the gateway's
// id in its metadata.
func (site BatchSite) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	endpoint := site.Endpoint(job.Endpoint)
	var file bytes.Buffer
	enc := json.NewEncoder(&file)
	enc.SetEscapeHTML(false)
	for _, l := range job.Lines {
		if err := enc.Encode(batchInputLine{CustomID: l.CustomID, Method: http.MethodPost, URL: endpoint, Body: l.Body}); err != nil {
			return "", fmt.Errorf("encoding a batch line: %w", err)
		}
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", job.ID+".jsonl")
	_, _ = fw.Write(file.Bytes())
	_ = mw.Close()
	var uploaded struct {
		ID string `json:"id"`
	}
	if err := site.call(ctx, do, up, http.MethodPost, "/files", mw.FormDataContentType(), form.Bytes(), "uploading the batch's input file", &uploaded); err != nil {
		return "", err
	}
	if uploaded.ID == "" {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream's answer to the batch's upload has no file id")
	}
	create, _ := json.Marshal(map[string]any{"input_file_id": uploaded.ID, "endpoint": endpoint,
		"completion_window": "24h", "metadata": map[string]string{"gateway_batch_id": job.ID}})
	var b vendorBatch
	if err := site.call(ctx, do, up, http.MethodPost, "/batches", "application/json", create, "creating the batch", &b); err != nil {
		return "", err
	}
	if b.ID == "" {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream's answer to the batch's creation has no batch id")
	}
	return b.ID, nil
}

// PollBatch reads the vendor batch's state.
func (site BatchSite) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	var b vendorBatch
	if err := site.call(ctx, do, up, http.MethodGet, "/batches/"+url.PathEscape(id), "", nil, "polling the batch", &b); err != nil {
		return nil, err
	}
	st := &adapters.BatchState{Results: b.OutputFileID, Errors: b.ErrorFileID,
		Done: b.RequestCounts.Completed + b.RequestCounts.Failed, Total: b.RequestCounts.Total}
	switch b.Status {
	case "validating", "in_progress", "finalizing":
	case "cancelling":
		st.Cancelling = true
	case "completed", "expired", "cancelled":
		st.Ended = true
	case "failed":
		st.Ended, st.Failed = true, true
		st.Error = "the upstream refused the batch"
		if b.Errors != nil && len(b.Errors.Data) > 0 {
			st.Error += ": " + b.Errors.Data[0].Message
		}
	default:
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream reported the batch in the unknown status %q", b.Status)
	}
	return st, nil
}

// CancelBatch asks the vendor to stop the batch.
func (site BatchSite) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	return site.call(ctx, do, up, http.MethodPost, "/batches/"+url.PathEscape(id)+"/cancel", "", nil, "cancelling the batch", nil)
}

// batchOutputLine is a line of a batch's output or error file.
type batchOutputLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// batchUsage reads a line's usage, chat and embeddings (prompt_tokens)
// or Responses (input_tokens) alike.
type batchUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u batchUsage) neutral() adapters.Usage {
	return adapters.Usage{PromptTokens: u.PromptTokens + u.InputTokens, CompletionTokens: u.CompletionTokens + u.OutputTokens,
		CachedTokens:    u.PromptTokensDetails.CachedTokens + u.InputTokensDetails.CachedTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens + u.OutputTokensDetails.ReasoningTokens}
}

// ParseBatchResult reads one line of an OpenAI batch's output or error file.
func ParseBatchResult(line []byte) (*adapters.BatchResult, error) {
	var l batchOutputLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("a result line is not JSON: %w", err)
	}
	r := &adapters.BatchResult{CustomID: l.CustomID, Line: line}
	switch {
	case l.Response != nil && l.Response.StatusCode >= 200 && l.Response.StatusCode <= 299:
		var body struct {
			Usage *batchUsage `json:"usage"`
		}
		_ = json.Unmarshal(l.Response.Body, &body)
		r.Succeeded, r.Status = true, l.Response.StatusCode
		if body.Usage != nil {
			r.Usage = body.Usage.neutral()
		}
	case l.Response != nil:
		r.Status, r.ErrorLine = l.Response.StatusCode, true
		if e := DecodeError(l.Response.StatusCode, l.Response.Body); e != nil {
			r.Error = e.Message
		}
	default:
		r.Status, r.ErrorLine = http.StatusInternalServerError, true
	}
	if l.Error != nil && r.Error == "" {
		r.Error = l.Error.Message
		if l.Error.Code != "" {
			r.Error = l.Error.Code + ": " + l.Error.Message
		}
	}
	return r, nil
}

// BatchResults reads the output file, then the error file.
func (site BatchSite) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, st *adapters.BatchState, max int64, each func(*adapters.BatchResult) error) error {
	left := max
	for _, file := range []string{st.Results, st.Errors} {
		if file == "" {
			continue
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodGet, site.URL(up, "/files/"+url.PathEscape(file)+"/content"), nil)
		if err != nil {
			return fmt.Errorf("building upstream request: %w", err)
		}
		site.Auth(hr, up)
		resp, err := do.Do(hr)
		if err != nil {
			return adapters.TaskError(up, "reading the batch's results", err)
		}
		if resp.StatusCode != http.StatusOK {
			_, body, _ := adapters.TaskCall(readDoer{resp}, hr)
			if e := DecodeError(resp.StatusCode, body); e != nil {
				return e
			}
			return fmt.Errorf("channel %q: reading the batch's results: the upstream answered %d", up.Channel, resp.StatusCode)
		}
		var read int64
		err = adapters.EachLine(resp.Body, left, func(line []byte) error {
			read += int64(len(line)) + 1
			r, err := ParseBatchResult(line)
			if err != nil {
				return err
			}
			r.Line = bytes.Clone(line)
			return each(r)
		})
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("channel %q: the batch's results: %w", up.Channel, err)
		}
		left -= read
	}
	return nil
}

// readDoer answers with a response already received, so TaskCall reads
// its body within bounds.
type readDoer struct{ resp *http.Response }

func (d readDoer) Do(*http.Request) (*http.Response, error) { return d.resp, nil }
