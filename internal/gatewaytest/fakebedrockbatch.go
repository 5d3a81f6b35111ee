package gatewaytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Bedrock batch inference, on FakeBedrock's server, as AWS's references
// describe it:
//
//   - S3, path-style (the channel's batch_s3_url): PUT and GET
//     /{bucket}/{key}, signed with SigV4 for service s3 (the payload's
//     hash in x-amz-content-sha256, the path not escaped twice); errors
//     in S3's XML (NoSuchKey, NoSuchBucket);
//   - the Bedrock control plane (batch_control_url), signed for service
//     bedrock: POST /model-invocation-job (CreateModelInvocationJob:
//     jobName, roleArn, modelId, inputDataConfig.s3InputDataConfig.s3Uri,
//     outputDataConfig.s3OutputDataConfig.s3Uri; the answer {"jobArn"}),
//     GET /model-invocation-job/{jobArn} (GetModelInvocationJob) and POST
//     /model-invocation-job/{jobArn}/stop (StopModelInvocationJob).
//
// A job reads its input object when created (a missing one, or a line
// that is not {"recordId", "modelInput"}, fails it as Bedrock's
// validation does). It stays InProgress while held (HoldBatches); the
// first poll after it is released runs every record through the fake's
// behaviour (Reply and the token counts) as Claude's InvokeModel answers
// and writes {"recordId", "modelInput", "modelOutput"} (or "error":
// {"errorCode", "errorMessage"} for a record FailRecords names, or a
// modelInput Claude would refuse) to <output uri>/<job id>/<input
// name>.out, with manifest.json.out beside it, and the job is Completed.
// A stopped job ends Stopped at its next poll with the first half of its
// records run; FailNextJob fails a job as its validation would.

// FakeBedrockBucket is the only bucket the fake's S3 has.
const FakeBedrockBucket = "gateway-batches"

type fakeBedrockBatches struct {
	objects map[string][]byte // bucket/key
	jobs    map[string]*fakeBedrockJob
	hold    bool
	failJob string // the next job fails validation with this message
	fail    func(recordID string) bool
	creates int
	n       int
}

type fakeBedrockJob struct {
	arn, name, model, role, token, status, message string
	input, output                                  string // s3 URIs
	records                                        int
	processed                                      int
	stop                                           bool
}

// HoldBatches keeps batch jobs in progress (true) or lets them end at
// their next poll (false).
func (f *FakeBedrock) HoldBatches(on bool) {
	f.mu.Lock()
	f.batch.hold = on
	f.mu.Unlock()
}

// FailNextJob makes the next job created fail its validation with message.
func (f *FakeBedrock) FailNextJob(message string) {
	f.mu.Lock()
	f.batch.failJob = message
	f.mu.Unlock()
}

// FailRecords makes the records whose id fail names fail.
func (f *FakeBedrock) FailRecords(fail func(recordID string) bool) {
	f.mu.Lock()
	f.batch.fail = fail
	f.mu.Unlock()
}

// BatchJobs counts the batch jobs created.
func (f *FakeBedrock) BatchJobs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batch.creates
}

// Object returns an S3 object of the fake's bucket, and whether it exists.
func (f *FakeBedrock) Object(key string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.batch.objects[FakeBedrockBucket+"/"+key]
	return b, ok
}

// s3Error writes an error as S3 does.
func s3Error(w http.ResponseWriter, status int, code, msg string) {
	if code == "" {
		code = map[int]string{403: "AccessDenied", 404: "NoSuchKey", 400: "InvalidRequest"}[status]
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_ = xml.NewEncoder(w).Encode(struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}{Code: code, Message: msg})
}

// serveBatch answers the S3 and control-plane calls; false for the
// runtime's own paths.
func (f *FakeBedrock) serveBatch(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/model-invocation-job"):
		if f.authorize(w, r, raw) {
			f.serveJobs(w, r, raw)
		}
		return true
	case strings.HasPrefix(p, "/model/"):
		return false
	}
	if !f.authorizeFor(w, r, raw, "s3") {
		return true
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if bucket != FakeBedrockBucket {
		s3Error(w, 404, "NoSuchBucket", "The specified bucket does not exist")
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batch.objects == nil {
		f.batch.objects = map[string][]byte{}
	}
	switch r.Method {
	case http.MethodPut:
		f.batch.objects[bucket+"/"+key] = bytes.Clone(raw)
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, len(raw)))
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		b, ok := f.batch.objects[bucket+"/"+key]
		if !ok {
			s3Error(w, 404, "NoSuchKey", "The specified key does not exist.")
			return true
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	default:
		s3Error(w, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	}
	return true
}

// jobNamePattern is CreateModelInvocationJob's pattern for jobName.
var jobNamePattern = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)

func (f *FakeBedrock) serveJobs(w http.ResponseWriter, r *http.Request, raw []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &f.batch
	if b.jobs == nil {
		b.jobs = map[string]*fakeBedrockJob{}
	}
	rest := strings.TrimPrefix(r.URL.Path, "/model-invocation-job")
	if rest == "" && r.Method == http.MethodPost {
		var req struct {
			JobName            string `json:"jobName"`
			RoleArn            string `json:"roleArn"`
			ClientRequestToken string `json:"clientRequestToken"`
			ModelID            string `json:"modelId"`
			InputDataConfig    struct {
				S3InputDataConfig struct {
					S3URI string `json:"s3Uri"`
				} `json:"s3InputDataConfig"`
			} `json:"inputDataConfig"`
			OutputDataConfig struct {
				S3OutputDataConfig struct {
					S3URI string `json:"s3Uri"`
				} `json:"s3OutputDataConfig"`
			} `json:"outputDataConfig"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.RoleArn == "" || req.ModelID == "" ||
			!strings.HasPrefix(req.InputDataConfig.S3InputDataConfig.S3URI, "s3://") || !strings.HasPrefix(req.OutputDataConfig.S3OutputDataConfig.S3URI, "s3://") {
			bedrockError(w, 400, "ValidationException", "jobName, roleArn, modelId, inputDataConfig and outputDataConfig are required")
			return
		}
		if !jobNamePattern.MatchString(req.JobName) {
			bedrockError(w, 400, "ValidationException", "1 validation error detected: Value at 'jobName' failed to satisfy constraint: Member must satisfy regular expression pattern")
			return
		}
		for _, j := range b.jobs {
			if req.ClientRequestToken != "" && j.token == req.ClientRequestToken {
				writeJSON(w, map[string]string{"jobArn": j.arn}) // idempotent
				return
			}
			if j.name == req.JobName {
				bedrockError(w, 400, "ValidationException", "A job with the name "+req.JobName+" already exists")
				return
			}
		}
		b.n++
		j := &fakeBedrockJob{arn: fmt.Sprintf("arn:aws:bedrock:%s:123456789012:model-invocation-job/fakejob%04d", f.Region, b.n),
			name: req.JobName, model: req.ModelID, role: req.RoleArn, token: req.ClientRequestToken, status: "Submitted",
			input: req.InputDataConfig.S3InputDataConfig.S3URI, output: req.OutputDataConfig.S3OutputDataConfig.S3URI}
		if in, ok := b.objects[strings.TrimPrefix(j.input, "s3://")]; !ok {
			j.status, j.message = "Failed", "The input S3 object was not found."
		} else {
			sc := bufio.NewScanner(bytes.NewReader(in))
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				var rec struct {
					RecordID   string          `json:"recordId"`
					ModelInput json.RawMessage `json:"modelInput"`
				}
				if json.Unmarshal(sc.Bytes(), &rec) != nil || len(rec.ModelInput) == 0 {
					j.status, j.message = "Failed", "Invalid record in the input file: each line needs recordId and modelInput."
					break
				}
				j.records++
			}
		}
		if b.failJob != "" {
			j.status, j.message, b.failJob = "Failed", b.failJob, ""
		}
		b.jobs[j.arn] = j
		b.creates++
		writeJSON(w, map[string]string{"jobArn": j.arn})
		return
	}
	arn, stop := strings.CutSuffix(strings.TrimPrefix(rest, "/"), "/stop")
	j, ok := b.jobs[arn]
	if !ok {
		bedrockError(w, 404, "ResourceNotFoundException", "The specified job could not be found.")
		return
	}
	switch {
	case stop && r.Method == http.MethodPost:
		if j.status != "Submitted" && j.status != "InProgress" {
			bedrockError(w, 409, "ConflictException", "The job cannot be stopped in its status "+j.status)
			return
		}
		j.status, j.stop = "Stopping", true
		writeJSON(w, map[string]any{})
	case !stop && r.Method == http.MethodGet:
		f.advanceJob(j)
		writeJSON(w, map[string]any{"jobArn": j.arn, "jobName": j.name, "modelId": j.model, "roleArn": j.role, "status": j.status,
			"message": j.message, "submitTime": time.Now().UTC().Format(time.RFC3339),
			"inputDataConfig":  map[string]any{"s3InputDataConfig": map[string]any{"s3Uri": j.input, "s3InputFormat": "JSONL"}},
			"outputDataConfig": map[string]any{"s3OutputDataConfig": map[string]any{"s3Uri": j.output}},
			"totalRecordCount": j.records, "processedRecordCount": j.processed})
	default:
		bedrockError(w, 404, "UnknownOperationException", "Unknown operation")
	}
}

// advanceJob moves a job at a poll; the caller holds the lock.
func (f *FakeBedrock) advanceJob(j *fakeBedrockJob) {
	switch {
	case j.status == "Stopping":
		f.runJob(j, j.records/2)
		j.status = "Stopped"
	case (j.status == "Submitted" || j.status == "InProgress") && f.batch.hold:
		j.status = "InProgress"
	case j.status == "Submitted" || j.status == "InProgress":
		f.runJob(j, j.records)
		j.status = "Completed"
	}
}

// claudeKeys are the members InvokeModel's Messages body for Claude takes.
var claudeKeys = []string{"anthropic_version", "anthropic_beta", "max_tokens", "messages", "system", "temperature", "top_p", "top_k",
	"stop_sequences", "tools", "tool_choice", "thinking", "metadata"}

// runJob answers the first n records and writes the job's output.
func (f *FakeBedrock) runJob(j *fakeBedrockJob, n int) {
	in := f.batch.objects[strings.TrimPrefix(j.input, "s3://")]
	cfg := f.b
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(in))
	sc.Buffer(nil, 16<<20)
	var ok, failed, i int
	for ; sc.Scan() && i < n; i++ {
		var rec struct {
			RecordID   string                     `json:"recordId"`
			ModelInput map[string]json.RawMessage `json:"modelInput"`
		}
		_ = json.Unmarshal(sc.Bytes(), &rec)
		line := map[string]any{"recordId": rec.RecordID, "modelInput": rec.ModelInput}
		why := ""
		for k := range rec.ModelInput {
			if !slices.Contains(claudeKeys, k) {
				why = "Malformed input request: #: extraneous key [" + k + "] is not permitted, please reformat your input and try again."
			}
		}
		if v := string(rec.ModelInput["anthropic_version"]); v != `"bedrock-2023-05-31"` {
			why = "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again."
		}
		if len(rec.ModelInput["messages"]) == 0 || len(rec.ModelInput["max_tokens"]) == 0 {
			why = "Malformed input request: #: required keys [messages, max_tokens] not found"
		}
		if f.batch.fail != nil && f.batch.fail(rec.RecordID) {
			why = "The fake upstream was told to fail this record."
		}
		if why != "" {
			failed++
			line["error"] = map[string]any{"errorCode": 400, "errorMessage": why}
		} else {
			ok++
			text, _ := answer(&cfg, &Recorded{})
			line["modelOutput"] = map[string]any{"id": fmt.Sprintf("msg_bdrk_%d", i), "type": "message", "role": "assistant", "model": "claude",
				"content": []map[string]any{{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": cfg.PromptTokens - cfg.CachedTokens, "output_tokens": cfg.CompletionTokens,
					"cache_read_input_tokens": cfg.CachedTokens, "cache_creation_input_tokens": 0}}
		}
		b, _ := json.Marshal(line)
		out.Write(append(b, '\n'))
	}
	j.processed = i
	jobID := path.Base(j.arn)
	dir := strings.TrimSuffix(strings.TrimPrefix(j.output, "s3://"), "/") + "/" + jobID + "/"
	f.batch.objects[dir+path.Base(j.input)+".out"] = out.Bytes()
	manifest, _ := json.Marshal(map[string]int{"totalRecordCount": j.records, "processedRecordCount": i, "successRecordCount": ok,
		"errorRecordCount": failed, "inputTokenCount": ok * int(cfg.PromptTokens), "outputTokenCount": ok * int(cfg.CompletionTokens)})
	f.batch.objects[dir+"manifest.json.out"] = manifest
}
