package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestBatchesBedrock: anthropic-sdk-go's message batches on a Bedrock
// Claude channel with a batch bucket run as Bedrock batch inference jobs
// (records in S3, the job polled, results read from S3), each answered
// line billed exactly at the batch price (Claude 0.80/4/0.08 at
// batch_discount 50%: 30 fresh*0.40 + 5 cached*0.04 + 12 out*2 = 36.2 ->
// 37 units), a record Bedrock refused errored and free; a batch smaller
// than batch_min_records runs on the gateway through Converse at the same
// price; a job Bedrock fails is refunded whole; a cancel stops the job,
// bills what ran and refunds the rest.
func TestBatchesBedrock(t *testing.T) {
	fake := gatewaytest.NewFakeBedrock(t, bedrockRegion, aws.Credentials{AccessKeyID: bedrockAKID, SecretAccessKey: bedrockSecret, SessionToken: bedrockToken}, "")
	fake.Set(func(b *gatewaytest.Behavior) {
		b.Reply, b.PromptTokens, b.CachedTokens, b.CompletionTokens = "Hello there", fakePrompt, fakeCached, fakeCompletion
	})
	cfg := gatewayConfig().
		option(block("tasks", "poll_interval 20ms", "max_poll_interval 50ms", "poll_timeout 1s", "lease 6s")).
		option(block("batches", "dir {{FILES}}")).
		channel("br-claude", block("bedrock", "region "+bedrockRegion, "batch_bucket s3://"+gatewaytest.FakeBedrockBucket+"/gateway",
			"batch_role_arn arn:aws:iam::123456789012:role/BedrockBatch", "batch_min_records 3", "batch_control_url {{BR}}", "batch_s3_url {{BR}}"),
			"{{BR}}", bedrockAKID+":"+bedrockSecret+":"+bedrockToken, bedrockClaude, "model_map "+bedrockClaudeN+" "+bedrockClaude).
		price(bedrockClaudeN, "input 0.80", "output 4", "cached_input 0.08", "batch_discount 50%")
	dir := t.TempDir()
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"BR": fake.URL, "FILES": filepath.Join(dir, "files")})
	ctx := context.Background()
	const start, perLine = 10_000_000, 37
	key := gw.AddUser("ada", start)
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	reqs := func(n int, prefix string) []anthropic.MessageBatchNewParamsRequest {
		out := make([]anthropic.MessageBatchNewParamsRequest, n)
		for i := range out {
			out[i] = anthropic.MessageBatchNewParamsRequest{CustomID: fmt.Sprintf("%s%d", prefix, i), Params: anthropic.MessageBatchNewParamsRequestParams{
				Model: bedrockClaudeN, MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("hi %d", i)))}}}
		}
		return out
	}
	ended := func(id string) *anthropic.MessageBatch {
		t.Helper()
		var b *anthropic.MessageBatch
		eventually(t, "batch "+id+" ended", func() bool {
			var err error
			b, err = ac.Messages.Batches.Get(ctx, id, anthropic.MessageBatchGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			return b.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
		})
		return b
	}
	results := func(id string) map[string]anthropic.MessageBatchIndividualResponse {
		t.Helper()
		out := map[string]anthropic.MessageBatchIndividualResponse{}
		stream := ac.Messages.Batches.ResultsStreaming(ctx, id, anthropic.MessageBatchResultsParams{})
		for stream.Next() {
			out[stream.Current().CustomID] = stream.Current()
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	// a batch job: five requests, one refused by Bedrock
	fake.FailRecords(func(id string) bool { return id == "q1" })
	b, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs(5, "q")})
	if err != nil {
		t.Fatal(err)
	}
	got := ended(b.ID)
	if got.RequestCounts.Succeeded != 4 || got.RequestCounts.Errored != 1 {
		t.Fatalf("counts %+v", got.RequestCounts)
	}
	res := results(b.ID)
	if len(res) != 5 || res["q1"].Result.Type != "errored" {
		t.Fatalf("results %+v", res)
	}
	for _, id := range []string{"q0", "q2", "q3", "q4"} {
		r := res[id]
		if r.Result.Type != "succeeded" || r.Result.Message.Content[0].Text != "Hello there" || r.Result.Message.Usage.OutputTokens != fakeCompletion {
			t.Fatalf("result %s: %+v", id, r)
		}
	}
	if fake.BatchJobs() != 1 || len(fake.Requests()) != 0 {
		t.Fatalf("%d jobs, %d runtime calls: the batch did not run as a batch job", fake.BatchJobs(), len(fake.Requests()))
	}
	if q, _ := gw.Quota("ada"); q != start-4*perLine {
		t.Fatalf("quota %d, want %d", q, start-4*perLine)
	}

	// two requests are fewer than batch_min_records: run on the gateway
	b, err = ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs(2, "s")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ended(b.ID); got.RequestCounts.Succeeded != 2 {
		t.Fatalf("local batch's counts %+v", got.RequestCounts)
	}
	if fake.BatchJobs() != 1 || len(fake.Requests()) != 2 {
		t.Fatalf("%d jobs, %d Converse calls: want the small batch's 2 requests sent one by one", fake.BatchJobs(), len(fake.Requests()))
	}
	if q, _ := gw.Quota("ada"); q != start-6*perLine {
		t.Fatalf("quota %d, want %d", q, start-6*perLine)
	}

	// a job Bedrock fails (its validation: the role cannot read the
	// bucket) refunds the batch whole
	fake.FailNextJob("The IAM role does not have permission to access the S3 bucket.")
	b, err = ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs(3, "f")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ended(b.ID); got.RequestCounts.Errored != 3 || fake.BatchJobs() != 2 {
		t.Fatalf("failed job: counts %+v, %d jobs", got.RequestCounts, fake.BatchJobs())
	}
	if q, _ := gw.Quota("ada"); q != start-6*perLine {
		t.Fatalf("after a failed job: quota %d, want %d", q, start-6*perLine)
	}

	// a cancel: the job is stopped, the half that ran is billed
	fake.HoldBatches(true)
	b, err = ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs(4, "c")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the batch job created", func() bool { return fake.BatchJobs() == 3 })
	if _, err := ac.Messages.Batches.Cancel(ctx, b.ID, anthropic.MessageBatchCancelParams{}); err != nil {
		t.Fatal(err)
	}
	if got := ended(b.ID); got.RequestCounts.Succeeded != 2 || got.RequestCounts.Canceled != 2 {
		t.Fatalf("cancelled batch's counts %+v", got.RequestCounts)
	}
	if q, _ := gw.Quota("ada"); q != start-8*perLine {
		t.Fatalf("after the cancel: quota %d, want %d", q, start-8*perLine)
	}
}
