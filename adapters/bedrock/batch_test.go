package bedrock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/bedrock"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

const (
	batchClaude = "anthropic.claude-3-5-haiku-20241022-v1:0"
	batchRole   = "arn:aws:iam::123456789012:role/BedrockBatch"
)

func batchAdapter(t *testing.T, f *gatewaytest.FakeBedrock, extra string) *bedrock.Adapter {
	t.Helper()
	return load(t, fmt.Sprintf(`{"region":%q,"batch_bucket":"s3://%s/gw/batches","batch_role_arn":%q,"batch_min_records":2,"batch_control_url":%q,"batch_s3_url":%q%s}`,
		f.Region, gatewaytest.FakeBedrockBucket, batchRole, f.URL, f.URL, extra))
}

func batchLines(n int) []adapters.BatchLine {
	lines := make([]adapters.BatchLine, n)
	for i := range lines {
		lines[i] = adapters.BatchLine{CustomID: fmt.Sprintf("req-%d", i),
			Body: json.RawMessage(fmt.Sprintf(`{"model":%q,"max_tokens":64,"stream":false,"messages":[{"role":"user","content":"line %d"}]}`, batchClaude, i))}
	}
	return lines
}

// TestBedrockBatch: a batch's records go to S3 signed for s3 (each
// custom_id its recordId, each body Claude's InvokeModel body: no model,
// anthropic_version bedrock-2023-05-31), the job is created with the
// role and the model, polled to its end, and its results read back from
// S3 as Anthropic's result lines with Claude's usage, within the bound
// given; a record Bedrock refused is an errored line. A batch submitted
// again is the same job.
func TestBedrockBatch(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIAFAKEBATCH0001", SecretAccessKey: "fakeBatchSecret/0123456789abcdef"}
	f := gatewaytest.NewFakeBedrock(t, "eu-west-3", creds, "")
	f.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CachedTokens, b.CompletionTokens = 30, 5, 12 })
	f.FailRecords(func(id string) bool { return id == "req-1" })
	a := batchAdapter(t, f, "")
	up := &adapters.Upstream{Channel: "br", Key: creds.AccessKeyID + ":" + creds.SecretAccessKey, Model: batchClaude}
	ctx := context.Background()
	job := &adapters.BatchJob{ID: "batch_abc123", Endpoint: "/v1/messages", Lines: batchLines(3)}

	arn, err := a.SubmitBatch(ctx, http.DefaultClient, up, job)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(arn, "arn:aws:bedrock:eu-west-3:") {
		t.Fatalf("job id %q", arn)
	}
	in, ok := f.Object("gw/batches/batch_abc123/records.jsonl")
	if !ok {
		t.Fatal("no input object in the bucket")
	}
	recs := strings.Split(strings.TrimSpace(string(in)), "\n")
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	var rec struct {
		RecordID   string         `json:"recordId"`
		ModelInput map[string]any `json:"modelInput"`
	}
	if err := json.Unmarshal([]byte(recs[2]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.RecordID != "req-2" || rec.ModelInput["anthropic_version"] != "bedrock-2023-05-31" || rec.ModelInput["model"] != nil ||
		rec.ModelInput["stream"] != nil || rec.ModelInput["max_tokens"] != float64(64) {
		t.Errorf("record %s", recs[2])
	}
	again, err := a.SubmitBatch(ctx, http.DefaultClient, up, job)
	if err != nil || again != arn || f.BatchJobs() != 1 {
		t.Errorf("submitted again: %q, %v, %d jobs", again, err, f.BatchJobs())
	}

	st, err := a.PollBatch(ctx, http.DefaultClient, up, arn)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ended || st.Failed || st.Total != 3 || st.Done != 3 {
		t.Fatalf("state %+v", st)
	}
	var got []*adapters.BatchResult
	err = a.BatchResults(ctx, http.DefaultClient, up, arn, st, 1<<20, func(r *adapters.BatchResult) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d results", len(got))
	}
	// the results are read within the batch's bound, never past it
	err = a.BatchResults(ctx, http.DefaultClient, up, arn, st, 200, func(*adapters.BatchResult) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "more than 200 bytes") {
		t.Errorf("results past the bound: %v", err)
	}
	for i, r := range got {
		if r.CustomID != fmt.Sprintf("req-%d", i) {
			t.Errorf("result %d is %q", i, r.CustomID)
		}
		var line struct {
			CustomID string `json:"custom_id"`
			Result   struct {
				Type string `json:"type"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Line, &line); err != nil || line.CustomID != r.CustomID {
			t.Errorf("line %s", r.Line)
		}
		if i == 1 {
			if r.Succeeded || r.Status != http.StatusBadRequest || !strings.Contains(r.Error, "told to fail") || line.Result.Type != "errored" {
				t.Errorf("refused record: %+v %s", r, r.Line)
			}
			continue
		}
		if !r.Succeeded || r.Usage.PromptTokens != 30 || r.Usage.CachedTokens != 5 || r.Usage.CompletionTokens != 12 || line.Result.Type != "succeeded" {
			t.Errorf("record %d: %+v %s", i, r, r.Line)
		}
	}
}

// TestBedrockBatchStop: a stopped job ends Stopped with the records it
// ran; the rest have no result (the gateway counts them cancelled).
func TestBedrockBatchStop(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIAFAKEBATCH0002", SecretAccessKey: "fakeBatchSecret/fedcba9876543210"}
	f := gatewaytest.NewFakeBedrock(t, "us-west-2", creds, "")
	f.HoldBatches(true)
	a := batchAdapter(t, f, "")
	up := &adapters.Upstream{Channel: "br", Key: creds.AccessKeyID + ":" + creds.SecretAccessKey, Model: "us." + batchClaude}
	ctx := context.Background()
	arn, err := a.SubmitBatch(ctx, http.DefaultClient, up, &adapters.BatchJob{ID: "batch_stop1", Lines: batchLines(4)})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := a.PollBatch(ctx, http.DefaultClient, up, arn); err != nil || st.Ended {
		t.Fatalf("held job: %+v %v", st, err)
	}
	if err := a.CancelBatch(ctx, http.DefaultClient, up, arn); err != nil {
		t.Fatal(err)
	}
	st, err := a.PollBatch(ctx, http.DefaultClient, up, arn)
	if err != nil || !st.Ended || st.Failed {
		t.Fatalf("stopped job: %+v %v", st, err)
	}
	n := 0
	if err := a.BatchResults(ctx, http.DefaultClient, up, arn, st, 1<<20, func(r *adapters.BatchResult) error {
		n++
		return nil
	}); err != nil || n != 2 {
		t.Errorf("%d results, %v", n, err)
	}
	if _, err := a.PollBatch(ctx, http.DefaultClient, up, arn+"x"); err == nil {
		t.Error("an unknown job polled")
	} else if ae, ok := err.(*adapters.Error); !ok || ae.Status != http.StatusNotFound {
		t.Errorf("unknown job: %v", err)
	}
}

// TestBedrockBatchRefusals: a wrong secret is refused by S3's own check
// (and the secret is in no error); a Bedrock API key cannot stage records
// in S3 and is refused before anything is sent.
func TestBedrockBatchRefusals(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIAFAKEBATCH0003", SecretAccessKey: "fakeBatchSecret/0000000000000000"}
	f := gatewaytest.NewFakeBedrock(t, "eu-west-3", creds, "ABSKfakeapikey0123")
	a := batchAdapter(t, f, "")
	ctx := context.Background()
	job := &adapters.BatchJob{ID: "batch_refused", Lines: batchLines(2)}
	_, err := a.SubmitBatch(ctx, http.DefaultClient, &adapters.Upstream{Channel: "br", Key: creds.AccessKeyID + ":wrongSecretValue123", Model: batchClaude}, job)
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") && !strings.Contains(err.Error(), "403") {
		t.Errorf("wrong secret: %v", err)
	} else if strings.Contains(err.Error(), "wrongSecretValue123") {
		t.Errorf("the secret is in the error: %v", err)
	}
	_, err = a.SubmitBatch(ctx, http.DefaultClient, &adapters.Upstream{Channel: "br", Key: "ABSKfakeapikey0123", Model: batchClaude}, job)
	if err == nil || !strings.Contains(err.Error(), "access key pair") {
		t.Errorf("API key: %v", err)
	}
	if f.BatchJobs() != 0 || len(f.Requests()) != 0 {
		t.Errorf("%d jobs, %d runtime requests", f.BatchJobs(), len(f.Requests()))
	}
}

// TestBedrockBatchTakes: only a channel with a bucket and a role takes a
// batch, only of Anthropic's models, only of batch_min_records lines (AWS's
// 100 by default); the options are checked at load.
func TestBedrockBatchTakes(t *testing.T) {
	configured := load(t, `{"batch_bucket":"s3://bucket-1/p","batch_role_arn":"`+batchRole+`"}`)
	for _, c := range []struct {
		a     *bedrock.Adapter
		model string
		lines int
		want  bool
	}{
		{configured, batchClaude, 100, true},
		{configured, "us." + batchClaude, 5000, true},
		{configured, batchClaude, 99, false},
		{configured, "amazon.nova-pro-v1:0", 100, false},
		{load(t, `{}`), batchClaude, 100, false},
		{load(t, `{"batch_bucket":"s3://bucket-1","batch_role_arn":"`+batchRole+`","batch_min_records":1}`), batchClaude, 1, true},
	} {
		if got := c.a.TakesBatch(c.model, c.lines); got != c.want {
			t.Errorf("%+v takes %s of %d: %v", c.a, c.model, c.lines, got)
		}
	}
	for _, bad := range []string{
		`{"batch_bucket":"s3://bucket-1/p"}`,
		`{"batch_role_arn":"` + batchRole + `"}`,
		`{"batch_bucket":"bucket-1","batch_role_arn":"` + batchRole + `"}`,
		`{"batch_bucket":"s3://Bucket_1","batch_role_arn":"` + batchRole + `"}`,
		`{"batch_bucket":"s3://bucket-1/a b","batch_role_arn":"` + batchRole + `"}`,
		`{"batch_bucket":"s3://bucket-1","batch_role_arn":"arn:aws:iam::123:user/x"}`,
		`{"batch_bucket":"s3://bucket-1","batch_role_arn":"` + batchRole + `","batch_s3_url":"ftp://x"}`,
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		if _, err := ctx.LoadModuleByID("gateway.adapters.bedrock", json.RawMessage(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
		cancel()
	}
}
