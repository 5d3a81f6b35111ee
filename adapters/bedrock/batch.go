package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
)

// Bedrock batch inference (the control plane's CreateModelInvocationJob,
// GetModelInvocationJob and StopModelInvocationJob), for Anthropic's
// models: the lines are written as JSONL records {"recordId",
// "modelInput": <InvokeModel's body for Claude, the Messages body with
// anthropic_version bedrock-2023-05-31>} to the operator's S3 bucket,
// the job reads them from there with the operator's service role, and
// writes {"recordId", "modelInput", "modelOutput" | "error": {"errorCode",
// "errorMessage"}} to <output uri>/<job id>/<input file name>.out, which
// is read back and handed to the client as Anthropic's batch results.
// Both hosts are signed with the channel's access key pair (S3 takes no
// Bedrock API key).

// DefaultBatchMinRecords is AWS's least number of records in a batch
// inference job.
const DefaultBatchMinRecords = 100

// bedrockAnthropicVersion is the anthropic_version Bedrock's Claude
// bodies carry in place of the anthropic-version header.
const bedrockAnthropicVersion = "bedrock-2023-05-31"

// batchInputName is the name of a batch's input object; its results are
// <batchInputName>.out.
const batchInputName = "records.jsonl"

var (
	// roleARN is an IAM role's ARN, the only role Bedrock assumes for a job.
	roleARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::\d{12}:role/.+$`)
	// bucketName and keyPrefix are what the adapter puts in URLs unescaped.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	keyPrefix  = regexp.MustCompile(`^[A-Za-z0-9._/-]*$`)
)

var _ adapters.BatchProvider = Adapter{}
var _ adapters.BatchTaker = Adapter{}

// validateBatch checks the batch options: both or neither of bucket and
// role, each in its form.
func (a *Adapter) validateBatch() error {
	if a.BatchBucket == "" && a.BatchRoleARN == "" {
		return nil
	}
	if a.BatchBucket == "" || a.BatchRoleARN == "" {
		return fmt.Errorf("bedrock: batch_bucket and batch_role_arn go together (the bucket batches are staged in and the role Bedrock reads it with)")
	}
	if _, _, err := splitS3(a.BatchBucket); err != nil {
		return fmt.Errorf("bedrock: batch_bucket: %w", err)
	}
	if !roleARN.MatchString(a.BatchRoleARN) {
		return fmt.Errorf("bedrock: batch_role_arn %q is not an IAM role's ARN such as arn:aws:iam::123456789012:role/BedrockBatch", a.BatchRoleARN)
	}
	for _, u := range []string{a.BatchControlURL, a.BatchS3URL} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return fmt.Errorf("bedrock: %q is not an http(s) URL", u)
		}
	}
	return nil
}

// splitS3 reads s3://bucket/prefix.
func splitS3(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3://bucket/prefix address", uri)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if !bucketName.MatchString(bucket) || !keyPrefix.MatchString(key) || strings.Contains(key, "//") {
		return "", "", fmt.Errorf("%q is not an s3://bucket/prefix address of letters, digits and . _ - /", uri)
	}
	return bucket, strings.Trim(key, "/"), nil
}

// BatchDialect implements adapters.BatchProvider: Claude's batches are
// Anthropic's Messages bodies.
func (Adapter) BatchDialect() string { return "anthropic" }

// TakesBatch implements adapters.BatchTaker: a bucket and role
// configured, one of Anthropic's models, and at least AWS's minimum of
// records; other batches run on the gateway.
func (a Adapter) TakesBatch(model string, lines int) bool {
	return a.BatchBucket != "" && a.BatchRoleARN != "" && claude(model) && lines >= max(a.BatchMinRecords, 1)
}

func (a Adapter) controlURL() string {
	if a.BatchControlURL != "" {
		return strings.TrimRight(a.BatchControlURL, "/")
	}
	return "https://bedrock." + a.region() + ".amazonaws.com"
}

// objectURL is the address of an S3 object: the region's virtual-hosted
// address, or path-style under batch_s3_url.
func (a Adapter) objectURL(bucket, key string) string {
	if a.BatchS3URL != "" {
		return strings.TrimRight(a.BatchS3URL, "/") + "/" + bucket + "/" + key
	}
	return "https://" + bucket + ".s3." + a.region() + ".amazonaws.com/" + key
}

// sigv4 signs hr for service with the channel's access key pair; a
// Bedrock API key cannot reach S3, so it is refused.
func (a Adapter) sigv4(ctx context.Context, hr *http.Request, up *adapters.Upstream, body []byte, s3 bool) error {
	creds, apiKey, err := credentials(up.Key)
	if err != nil {
		return adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest, "channel %q: %v", up.Channel, err)
	}
	if apiKey != "" || up.Key == "" {
		// refused as the batch's, not the channel's, fault: the channel
		// serves its requests with that key, and is not to be ejected
		return adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest,
			"channel %q: Bedrock batch inference stages its records in S3, which takes an access key pair (ACCESS_KEY_ID:SECRET_ACCESS_KEY), not a Bedrock API key", up.Channel)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	s, svc := a.signer, service
	if s3 {
		s, svc = a.s3signer, "s3"
		hr.Header.Set("X-Amz-Content-Sha256", hash) // S3 wants the body's hash sent, and signed
	}
	if s == nil {
		s = fallbackSigner
		if s3 {
			s = fallbackS3Signer
		}
	}
	if err := s.forKey(up.Key).SignHTTP(ctx, creds, hr, hash, svc, a.region(), time.Now()); err != nil {
		return fmt.Errorf("signing the bedrock batch request: %w", err)
	}
	return nil
}

// control sends one call to the Bedrock control plane and decodes its
// answer into dst.
func (a Adapter) control(ctx context.Context, do adapters.Doer, up *adapters.Upstream, method, p string, body []byte, what string, dst any) error {
	hr, err := http.NewRequestWithContext(ctx, method, a.controlURL()+p, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	if body == nil {
		hr.Body, hr.ContentLength = http.NoBody, 0
	} else {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if err := a.sigv4(ctx, hr, up, body, false); err != nil {
		return err
	}
	_, answer, err := adapters.TaskCallOK(do, up, hr, what, Adapter{}.DecodeError)
	if err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(answer, dst); err != nil {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Bedrock's answer to %s is not the expected JSON: %v", what, err)
	}
	return nil
}

// s3Error is S3's XML error body.
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// decodeS3Error reads S3's error: a refused bucket or role is the
// channel's fault (its configuration), as is every other.
func decodeS3Error(status int, body []byte) *adapters.Error {
	var e s3Error
	_ = xml.Unmarshal(body, &e)
	msg := strings.TrimSpace(e.Code + ": " + e.Message)
	if e.Code == "" {
		msg = http.StatusText(status)
	}
	typ := adapters.ErrAPI
	if status == http.StatusNotFound {
		typ = adapters.ErrNotFound
	}
	out := adapters.Errorf(http.StatusBadGateway, typ, "the batch's S3 bucket answered %d: %s", status, msg)
	if status == http.StatusNotFound {
		out.Status = http.StatusNotFound
	}
	out.Fault = adapters.FaultChannel
	return out
}

// putObject writes body to s3://bucket/key.
func (a Adapter) putObject(ctx context.Context, do adapters.Doer, up *adapters.Upstream, bucket, key string, body []byte) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPut, a.objectURL(bucket, key), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/jsonl")
	if err := a.sigv4(ctx, hr, up, body, true); err != nil {
		return err
	}
	_, _, err = adapters.TaskCallOK(do, up, hr, "writing the batch's records to S3", decodeS3Error)
	return err
}

// jobName is a job's name from the gateway's batch id: letters, digits
// and hyphens, at most 63.
func jobName(id string) string {
	var b strings.Builder
	b.WriteString("gateway-")
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// batchRecord is a line of a job's input.
type batchRecord struct {
	RecordID   string          `json:"recordId"`
	ModelInput json.RawMessage `json:"modelInput"`
}

// modelInput is a Messages body as InvokeModel takes it for Claude: no
// model (it is the job's) nor stream, anthropic_version in the body.
func modelInput(body json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the request is not a JSON object: %w", err)
	}
	delete(m, "model")
	delete(m, "stream")
	m["anthropic_version"] = json.RawMessage(`"` + bedrockAnthropicVersion + `"`)
	return json.Marshal(m)
}

// createJobRequest is CreateModelInvocationJob's body.
type createJobRequest struct {
	JobName            string `json:"jobName"`
	RoleARN            string `json:"roleArn"`
	ClientRequestToken string `json:"clientRequestToken,omitempty"`
	ModelID            string `json:"modelId"`
	InputDataConfig    struct {
		S3InputDataConfig s3Config `json:"s3InputDataConfig"`
	} `json:"inputDataConfig"`
	OutputDataConfig struct {
		S3OutputDataConfig s3Config `json:"s3OutputDataConfig"`
	} `json:"outputDataConfig"`
	TimeoutDurationInHours int `json:"timeoutDurationInHours,omitempty"`
}

type s3Config struct {
	S3URI         string `json:"s3Uri"`
	S3InputFormat string `json:"s3InputFormat,omitempty"`
}

// SubmitBatch implements adapters.BatchProvider: the records to S3, then
// the job; its id is the job's ARN. The job's client request token is the
// gateway's batch id, so a batch submitted again (a crash between the
// job's creation and its record) is the same job.
func (a Adapter) SubmitBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, job *adapters.BatchJob) (string, error) {
	if a.BatchBucket == "" || a.BatchRoleARN == "" {
		return "", adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest, "channel %q has no batch_bucket and batch_role_arn for batch inference", up.Channel)
	}
	bucket, prefix, err := splitS3(a.BatchBucket)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, l := range job.Lines {
		in, err := modelInput(l.Body)
		if err != nil {
			return "", adapters.BadRequest("request %q of the batch cannot be sent: %v", l.CustomID, err)
		}
		// the custom_id (Anthropic's: letters, digits, _ and -) is the record's id
		if err := enc.Encode(batchRecord{RecordID: l.CustomID, ModelInput: in}); err != nil {
			return "", fmt.Errorf("encoding the batch: %w", err)
		}
	}
	dir := path.Join(prefix, job.ID)
	inKey := dir + "/" + batchInputName
	if err := a.putObject(ctx, do, up, bucket, inKey, buf.Bytes()); err != nil {
		return "", err
	}
	req := createJobRequest{JobName: jobName(job.ID), RoleARN: a.BatchRoleARN, ClientRequestToken: jobName(job.ID), ModelID: up.Model,
		TimeoutDurationInHours: 24}
	req.InputDataConfig.S3InputDataConfig = s3Config{S3URI: "s3://" + bucket + "/" + inKey, S3InputFormat: "JSONL"}
	req.OutputDataConfig.S3OutputDataConfig = s3Config{S3URI: "s3://" + bucket + "/" + dir + "/out/"}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encoding the batch job: %w", err)
	}
	var out struct {
		JobARN string `json:"jobArn"`
	}
	if err := a.control(ctx, do, up, http.MethodPost, "/model-invocation-job", body, "creating the batch inference job", &out); err != nil {
		return "", err
	}
	if out.JobARN == "" {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Bedrock's answer to the batch job's creation has no jobArn")
	}
	return out.JobARN, nil
}

// jobPath is the address of a job named by its ARN, escaped whole (its
// colons and slash are one path label).
func jobPath(arn string) string {
	return "/model-invocation-job/" + strings.ReplaceAll(url.PathEscape(arn), ":", "%3A")
}

// invocationJob is the part of GetModelInvocationJob's answer the gateway reads.
type invocationJob struct {
	JobARN          string `json:"jobArn"`
	Status          string `json:"status"`
	Message         string `json:"message"`
	InputDataConfig struct {
		S3InputDataConfig s3Config `json:"s3InputDataConfig"`
	} `json:"inputDataConfig"`
	OutputDataConfig struct {
		S3OutputDataConfig s3Config `json:"s3OutputDataConfig"`
	} `json:"outputDataConfig"`
	TotalRecordCount     int64 `json:"totalRecordCount"`
	ProcessedRecordCount int64 `json:"processedRecordCount"`
}

// PollBatch implements adapters.BatchProvider. An ended job's results
// are at <output uri>/<job id>/<input name>.out (BatchState.Results); a
// job stopped or expired before it ran may have none (BatchState.Errors
// says "none-ok").
func (a Adapter) PollBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) (*adapters.BatchState, error) {
	var j invocationJob
	if err := a.control(ctx, do, up, http.MethodGet, jobPath(id), nil, "polling the batch inference job", &j); err != nil {
		return nil, err
	}
	st := &adapters.BatchState{Done: j.ProcessedRecordCount, Total: j.TotalRecordCount}
	switch j.Status {
	case "Submitted", "Validating", "Scheduled", "InProgress":
	case "Stopping":
		st.Cancelling = true
	case "Completed", "PartiallyCompleted", "Stopped", "Expired":
		st.Ended = true
		jobID := id[strings.LastIndexByte(id, '/')+1:]
		in := j.InputDataConfig.S3InputDataConfig.S3URI
		st.Results = strings.TrimRight(j.OutputDataConfig.S3OutputDataConfig.S3URI, "/") + "/" + jobID + "/" + path.Base(in) + ".out"
		if j.Status == "Stopped" || j.Status == "Expired" {
			st.Errors = resultsMayBeMissing
		}
	case "Failed":
		st.Ended, st.Failed = true, true
		st.Error = "Bedrock's batch inference job failed: " + j.Message
	default:
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "Bedrock reported the batch inference job in the unknown status %q", j.Status)
	}
	return st, nil
}

// resultsMayBeMissing marks a job that may have ended before writing results.
const resultsMayBeMissing = "none-ok"

// CancelBatch implements adapters.BatchProvider: StopModelInvocationJob.
func (a Adapter) CancelBatch(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string) error {
	return a.control(ctx, do, up, http.MethodPost, jobPath(id)+"/stop", nil, "stopping the batch inference job", nil)
}

// outputRecord is a line of a job's results.
type outputRecord struct {
	RecordID    string          `json:"recordId"`
	ModelOutput json.RawMessage `json:"modelOutput"`
	Error       *struct {
		ErrorCode    int    `json:"errorCode"`
		ErrorMessage string `json:"errorMessage"`
	} `json:"error"`
}

// anthropicResult is a record as Anthropic's batch results write it.
func anthropicResult(line []byte) ([]byte, error) {
	var r outputRecord
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("a result record is not JSON: %w", err)
	}
	var result any
	switch {
	case r.Error != nil:
		typ := "invalid_request_error"
		switch {
		case r.Error.ErrorCode == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case r.Error.ErrorCode >= 500 || r.Error.ErrorCode == 0:
			typ = "api_error"
		}
		result = map[string]any{"type": "errored", "error": map[string]any{"type": "error",
			"error": map[string]any{"type": typ, "message": r.Error.ErrorMessage}}}
	case len(r.ModelOutput) > 0 && string(r.ModelOutput) != "null":
		result = map[string]any{"type": "succeeded", "message": r.ModelOutput}
	default:
		return nil, fmt.Errorf("the record %q has neither modelOutput nor error", r.RecordID)
	}
	return json.Marshal(map[string]any{"custom_id": r.RecordID, "result": result})
}

// BatchResults implements adapters.BatchProvider: the job's output object
// from S3, each record turned into Anthropic's result line.
func (a Adapter) BatchResults(ctx context.Context, do adapters.Doer, up *adapters.Upstream, id string, st *adapters.BatchState, maxBytes int64, each func(*adapters.BatchResult) error) error {
	if st == nil || st.Results == "" {
		return fmt.Errorf("channel %q: the batch job's results are not known", up.Channel)
	}
	bucket, key, err := splitS3(st.Results)
	if err != nil {
		return fmt.Errorf("channel %q: the batch job's results: %w", up.Channel, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, a.objectURL(bucket, key), http.NoBody)
	if err != nil {
		return fmt.Errorf("building upstream request: %w", err)
	}
	if err := a.sigv4(ctx, hr, up, nil, true); err != nil {
		return err
	}
	resp, err := do.Do(hr)
	if err != nil {
		return adapters.TaskError(up, "reading the batch's results", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && st.Errors == resultsMayBeMissing {
		return nil // stopped or expired before a record ran: every line cancelled
	}
	if resp.StatusCode != http.StatusOK {
		return adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "channel %q: reading the batch's results from S3: it answered %d", up.Channel, resp.StatusCode)
	}
	err = adapters.EachLine(resp.Body, maxBytes, func(line []byte) error {
		out, err := anthropicResult(line)
		if err != nil {
			return err
		}
		r, err := anthropic.ParseBatchResult(out)
		if err != nil {
			return err
		}
		return each(r)
	})
	if err != nil {
		return fmt.Errorf("channel %q: the batch's results: %w", up.Channel, err)
	}
	return nil
}
