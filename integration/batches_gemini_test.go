package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// A Gemini model's batches run on the Gemini API's batch mode
// (batchGenerateContent, gatewaytest.FakeBatchVendor): OpenAI's and
// Anthropic's batch lines translated to generateContent requests, the
// answers rendered back in the batch's dialect, each line billed from its
// usageMetadata at the batch price, a cancel refunding the lines it cut.
func TestBatchesGemini(t *testing.T) {
	fake := gatewaytest.NewFakeBatchVendor(t, "sk-up-batches")
	cfg := batchConfig().
		channel("gemini", "gemini", "{{UP}}", "sk-up-batches", "gemini-flash", "model_map gemini-flash gemini-2.5-flash").
		price("gemini-flash", "input 0.30", "output 2.50", "batch_discount 50%")
	dir := t.TempDir()
	vars := gatewaytest.Vars{"UP": fake.URL, "FILES": filepath.Join(dir, "files"), "DB": filepath.Join(dir, "gateway.db")}
	gw := gatewaytest.Start(t, cfg.String(), vars)
	gw.DBPath = vars["DB"]
	s := &batchSetup{gw: gw, fake: fake}
	ctx := context.Background()
	const start = 10_000_000
	key := gw.AddUser("ada", start)
	c := s.openai(key)
	cost := func(i int) int64 { return lineCost(i, 150_000, 1_250_000) }

	// forty lines, line 7 refused by the vendor
	fake.FailLines(func(id string) bool { return id == "req-7" })
	fake.Hold(true)
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(40, "gemini-flash")), "in.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, c, b.ID, openai.BatchStatusInProgress)
	if fake.Creates() != 1 {
		t.Fatalf("%d batches created at the vendor, want 1 (not run locally)", fake.Creates())
	}
	if q, _ := gw.Quota("ada"); q >= start {
		t.Fatalf("nothing reserved for a running batch: quota %d", q)
	}
	fake.Hold(false)
	done := waitBatch(t, c, b.ID, openai.BatchStatusCompleted)
	if done.RequestCounts.Completed != 39 || done.RequestCounts.Failed != 1 || done.OutputFileID == "" || done.ErrorFileID == "" {
		t.Fatalf("completed batch: %+v", done.RequestCounts)
	}
	var want int64
	seen := map[string]bool{}
	for _, line := range fileLines(t, c, done.OutputFileID) {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                   `json:"status_code"`
				Body       openai.ChatCompletion `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Response.StatusCode != 200 || len(l.Response.Body.Choices) != 1 ||
			l.Response.Body.Choices[0].Message.Content != "ok" || l.Response.Body.Object != "chat.completion" {
			t.Fatalf("output line %s: %v", line, err)
		}
		var i int
		_, _ = fmt.Sscanf(l.CustomID, "req-%d", &i)
		p, cpl := gatewaytest.BatchUsage(i)
		if u := l.Response.Body.Usage; u.PromptTokens != p || u.CompletionTokens != cpl {
			t.Fatalf("line %s: usage %+v, want %d and %d", l.CustomID, u, p, cpl)
		}
		seen[l.CustomID] = true
		want += cost(i)
	}
	if len(seen) != 39 || seen["req-7"] {
		t.Fatalf("%d lines answered (req-7 among them: %v)", len(seen), seen["req-7"])
	}
	if errs := fileLines(t, c, done.ErrorFileID); len(errs) != 1 || !bytes.Contains([]byte(errs[0]), []byte(`"custom_id":"req-7"`)) ||
		!bytes.Contains([]byte(errs[0]), []byte(`"status_code":400`)) || !bytes.Contains([]byte(errs[0]), []byte("line refused")) {
		t.Fatalf("error file: %v", errs)
	}
	if q, _ := gw.Quota("ada"); q != start-want {
		t.Fatalf("ada's quota %d, want %d (the batch price of the 39 lines answered)", q, start-want)
	}
	rows := gw.WaitUsage("ada", 40)
	var sum int64
	n := 0
	for _, r := range rows {
		if r.Endpoint == "/v1/batches" {
			n++
			sum += r.Cost
		}
	}
	if n != 40 || sum != want {
		t.Fatalf("%d usage rows summing %d, want 40 summing %d", n, sum, want)
	}
	if models := fake.Models(); len(models) != 1 || models[0] != "gemini-2.5-flash" {
		t.Fatalf("the vendor saw models %v", models)
	}

	// a cancel: the lines answered before it are billed, the rest refunded
	fake.FailLines(nil)
	fake.Hold(true)
	before, _ := gw.Quota("ada")
	f2, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(10, "gemini-flash")), "ten.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f2.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the batch at the vendor", func() bool { return fake.Creates() == 2 })
	if _, err := c.Batches.Cancel(ctx, b2.ID); err != nil {
		t.Fatal(err)
	}
	cancelled := waitBatch(t, c, b2.ID, openai.BatchStatusCancelled)
	var half int64
	for i := range 5 {
		half += cost(i)
	}
	if q, _ := gw.Quota("ada"); q != before-half {
		t.Fatalf("after a cancel with 5 of 10 lines done: quota %d, want %d", q, before-half)
	}
	if got := fileLines(t, c, cancelled.OutputFileID); len(got) != 5 || cancelled.RequestCounts.Completed != 5 {
		t.Fatalf("cancelled batch: %d output lines, counts %+v", len(got), cancelled.RequestCounts)
	}

	// an Anthropic batch of the same model goes to Gemini's batch mode too
	fake.Hold(false)
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	reqs := make([]anthropic.MessageBatchNewParamsRequest, 4)
	for i := range reqs {
		reqs[i] = anthropic.MessageBatchNewParamsRequest{CustomID: fmt.Sprintf("q%d", i), Params: anthropic.MessageBatchNewParamsRequestParams{
			Model: "gemini-flash", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}}
	}
	before, _ = gw.Quota("ada")
	ab, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message batch ended", func() bool {
		got, err := ac.Messages.Batches.Get(ctx, ab.ID, anthropic.MessageBatchGetParams{})
		return err == nil && got.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
	if fake.Creates() != 3 {
		t.Fatalf("%d batches created at the vendor, want 3", fake.Creates())
	}
	stream := ac.Messages.Batches.ResultsStreaming(ctx, ab.ID, anthropic.MessageBatchResultsParams{})
	var acost int64
	n = 0
	for stream.Next() {
		r := stream.Current()
		var i int
		_, _ = fmt.Sscanf(r.CustomID, "q%d", &i)
		p, cpl := gatewaytest.BatchUsage(i)
		if r.Result.Type != "succeeded" || r.Result.Message.Usage.InputTokens != p || r.Result.Message.Usage.OutputTokens != cpl ||
			len(r.Result.Message.Content) != 1 || r.Result.Message.Content[0].Text != "ok" {
			t.Fatalf("result %+v", r)
		}
		acost += cost(i)
		n++
	}
	if stream.Err() != nil || n != 4 {
		t.Fatalf("%d results, %v", n, stream.Err())
	}
	if q, _ := gw.Quota("ada"); q != before-acost {
		t.Fatalf("quota %d, want %d", q, before-acost)
	}

	// a line its dialect refuses is the caller's 400, nothing reserved
	before, _ = gw.Quota("ada")
	mixed := append(chatLines(1, "gemini-flash"), []byte(`{"custom_id":"bad","method":"POST","url":"/v1/chat/completions","body":{"model":"gemini-flash","messages":"not a list"}}`+"\n")...)
	f3, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(mixed), "mixed.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f3.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if e := sdkError(t, err); e.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, `"bad"`) {
		t.Fatalf("a batch with a line that does not decode: %d %s", e.StatusCode, e.Message)
	}
	if q, _ := gw.Quota("ada"); q != before || fake.Creates() != 3 {
		t.Fatalf("a refused batch: quota %d (was %d), %d vendor batches", q, before, fake.Creates())
	}

	// an Anthropic batch cancelled: what ran is billed, every other
	// request has its canceled result, as Anthropic's results have
	fake.Hold(true)
	before, _ = gw.Quota("ada")
	ab2, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message batch at the vendor", func() bool { return fake.Creates() == 4 })
	if _, err := ac.Messages.Batches.Cancel(ctx, ab2.ID, anthropic.MessageBatchCancelParams{}); err != nil {
		t.Fatal(err)
	}
	var ended *anthropic.MessageBatch
	eventually(t, "the cancelled message batch ended", func() bool {
		ended, err = ac.Messages.Batches.Get(ctx, ab2.ID, anthropic.MessageBatchGetParams{})
		return err == nil && ended.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
	if ended.RequestCounts.Succeeded != 2 || ended.RequestCounts.Canceled != 2 {
		t.Fatalf("counts %+v", ended.RequestCounts)
	}
	types := map[string]string{}
	stream = ac.Messages.Batches.ResultsStreaming(ctx, ab2.ID, anthropic.MessageBatchResultsParams{})
	for stream.Next() {
		types[stream.Current().CustomID] = string(stream.Current().Result.Type)
	}
	if stream.Err() != nil || len(types) != 4 || types["q0"] != "succeeded" || types["q1"] != "succeeded" || types["q2"] != "canceled" || types["q3"] != "canceled" {
		t.Fatalf("results %v, %v", types, stream.Err())
	}
	if q, _ := gw.Quota("ada"); q != before-cost(0)-cost(1) {
		t.Fatalf("quota %d, want %d", q, before-cost(0)-cost(1))
	}

	// another user's batch is a 404
	bob := s.openai(gw.AddUser("bob", start))
	if _, err := bob.Batches.Get(ctx, b.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob reads ada's batch: %v", err)
	}
}
