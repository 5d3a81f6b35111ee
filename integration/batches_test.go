package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The Files and Batch APIs (docs/batches.md): OpenAI's /v1/files and
// /v1/batches and Anthropic's /v1/messages/batches through the official
// SDKs, run on the vendors' batch APIs (gatewaytest.FakeBatchVendor),
// each line billed at the batch price, cancelled and failed lines
// refunded, across a reload and a SIGKILL; another user's file or batch
// is a 404; too big a file and too many lines refused before they cost.

// batchConfig runs gpt-4o-mini and claude-haiku on the fake's batch APIs,
// at half price in batches, polled every 20ms.
func batchConfig() *caddyfile {
	return gatewayConfig().
		option("token_cache_ttl 1s").
		option(block("tasks", "poll_interval 20ms", "max_poll_interval 50ms", "poll_timeout 1s", "lease 6s")).
		option(block("batches", "dir {{FILES}}", "max_file_size 256KB", "max_lines 1000", "max_user_storage 1MB")).
		channel("openai", "openai", "{{UP}}", "sk-up-batches", "gpt-4o-mini").
		channel("anthropic", "anthropic", "{{UP}}", "sk-up-batches", "claude-haiku").
		channel("azure", "azure", "{{UP}}", "sk-up-batches", "gpt-4o-batch text-embedding-batch").
		price("gpt-4o-batch", "input 2.5", "output 10", "batch_discount 50%").
		channel("demo", "demo", "", "", "demo").
		price("demo", "input 1", "output 2", "batch_discount 50%").
		price("text-embedding-batch", "input 0.13", "batch_input 0.065").
		price("gpt-4o-mini", "input 0.15", "output 0.60", "batch_discount 50%").
		price("claude-haiku", "input 1", "output 5", "batch_input 0.5", "batch_output 2.5")
}

type batchSetup struct {
	gw   *gatewaytest.Gateway
	fake *gatewaytest.FakeBatchVendor
	cfg  *caddyfile
	vars gatewaytest.Vars
}

func startBatches(t *testing.T) *batchSetup {
	t.Helper()
	fake := gatewaytest.NewFakeBatchVendor(t, "sk-up-batches")
	cfg := batchConfig()
	dir := t.TempDir()
	vars := gatewaytest.Vars{"UP": fake.URL, "FILES": filepath.Join(dir, "files"), "DB": filepath.Join(dir, "gateway.db")}
	gw := gatewaytest.Start(t, cfg.String(), vars)
	gw.DBPath = vars["DB"]
	return &batchSetup{gw: gw, fake: fake, cfg: cfg, vars: vars}
}

// second starts another gateway on the same database and files.
func (s *batchSetup) second(t *testing.T) *gatewaytest.Gateway {
	t.Helper()
	gw := gatewaytest.Start(t, s.cfg.String(), s.vars)
	gw.DBPath = s.vars["DB"]
	return gw
}

func (s *batchSetup) openai(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// chatLines is an OpenAI batch input file of n chat lines.
func chatLines(n int, model string) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"say hi %d"}],"max_tokens":50}}`+"\n", i, model, i)
	}
	return b.Bytes()
}

// lineCost is what line i of the fake's answers costs at the batch price
// (per million tokens, input and output, in quota units), rounded up.
func lineCost(i int, in, out int64) int64 {
	p, c := gatewaytest.BatchUsage(i)
	sum := p*in + c*out
	return (sum + 999_999) / 1_000_000
}

func waitBatch(t *testing.T, c openai.Client, id string, status openai.BatchStatus) *openai.Batch {
	t.Helper()
	var b *openai.Batch
	eventually(t, "batch "+id+" "+string(status), func() bool {
		var err error
		b, err = c.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return b.Status == status
	})
	return b
}

func fileLines(t *testing.T, c openai.Client, id string) []string {
	t.Helper()
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestBatchesOpenAI(t *testing.T) {
	s := startBatches(t)
	ctx := context.Background()
	const start = 10_000_000
	ada := s.openai(s.gw.AddUser("ada", start))
	bob := s.openai(s.gw.AddUser("bob", start))

	// a thousand lines, ten of which the vendor refuses
	failing := func(i int) bool { return i%100 == 7 }
	s.fake.FailLines(func(id string) bool {
		var i int
		_, _ = fmt.Sscanf(id, "req-%d", &i)
		return failing(i)
	})
	s.fake.Hold(true)
	f, err := ada.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(1000, "gpt-4o-mini")), "in.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if f.Purpose != openai.FileObjectPurposeBatch || f.Filename != "in.jsonl" || f.Bytes != int64(len(chatLines(1000, "gpt-4o-mini"))) {
		t.Fatalf("file: %+v", f)
	}
	if got, err := ada.Files.Get(ctx, f.ID); err != nil || got.ID != f.ID {
		t.Fatalf("get file: %v %+v", err, got)
	}
	b, err := ada.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	if b.RequestCounts.Total != 1000 || b.InputFileID != f.ID || b.Endpoint != "/v1/chat/completions" {
		t.Fatalf("batch: %+v", b)
	}
	// the worst case is held while it runs
	if q, _ := s.gw.Quota("ada"); q >= start {
		t.Fatalf("nothing reserved for a running batch: quota %d", q)
	}

	// another user sees none of it, in OpenAI's 404
	if _, err := bob.Batches.Get(ctx, b.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob reads ada's batch: %v", err)
	}
	if _, err := bob.Batches.Cancel(ctx, b.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob cancels ada's batch: %v", err)
	}
	if _, err := bob.Files.Get(ctx, f.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob reads ada's file: %v", err)
	}
	if _, err := bob.Files.Content(ctx, f.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob downloads ada's file: %v", err)
	}
	if _, err := bob.Files.Delete(ctx, f.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("bob deletes ada's file: %v", err)
	}
	if page, err := bob.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("bob's batch list: %v %d", err, len(page.Data))
	}

	s.fake.Hold(false)
	done := waitBatch(t, ada, b.ID, openai.BatchStatusCompleted)
	if done.RequestCounts.Completed != 990 || done.RequestCounts.Failed != 10 || done.OutputFileID == "" || done.ErrorFileID == "" {
		t.Fatalf("completed batch: %+v", done.RequestCounts)
	}
	out, errs := fileLines(t, ada, done.OutputFileID), fileLines(t, ada, done.ErrorFileID)
	if len(out) != 990 || len(errs) != 10 {
		t.Fatalf("output %d lines, errors %d, want 990 and 10", len(out), len(errs))
	}
	var want int64
	for i := range 1000 {
		if !failing(i) {
			want += lineCost(i, 75_000, 300_000)
		}
	}
	if q, _ := s.gw.Quota("ada"); q != start-want {
		t.Fatalf("ada's quota %d, want %d (charged %d, the batch price of the 990 lines answered)", q, start-want, want)
	}
	rows := s.gw.WaitUsage("ada", 1000)
	var sum int64
	var n int
	for _, r := range rows {
		if r.Endpoint == "/v1/batches" {
			n++
			sum += r.Cost
		}
	}
	if n != 1000 || sum != want {
		t.Fatalf("%d usage rows summing %d, want 1000 summing %d", n, sum, want)
	}
	if page, err := ada.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
		t.Fatalf("ada's batch list: %v %+v", err, page)
	}
	if models := s.fake.Models(); len(models) != 1 || models[0] != "gpt-4o-mini" {
		t.Fatalf("the vendor saw models %v", models)
	}

	// a cancel: the lines done before it are billed, the rest refunded
	s.fake.FailLines(nil)
	s.fake.Hold(true)
	before, _ := s.gw.Quota("ada")
	f2, err := ada.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(10, "gpt-4o-mini")), "ten.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := ada.Batches.New(ctx, openai.BatchNewParams{InputFileID: f2.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the batch at the vendor", func() bool { return s.fake.Creates() == 2 })
	c2, err := ada.Batches.Cancel(ctx, b2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Status != openai.BatchStatusCancelling {
		t.Fatalf("cancel answered %q", c2.Status)
	}
	cancelled := waitBatch(t, ada, b2.ID, openai.BatchStatusCancelled)
	var half int64
	for i := range 5 {
		half += lineCost(i, 75_000, 300_000)
	}
	if q, _ := s.gw.Quota("ada"); q != before-half {
		t.Fatalf("after a cancel with 5 of 10 lines done: quota %d, want %d", q, before-half)
	}
	if got := fileLines(t, ada, cancelled.OutputFileID); len(got) != 5 {
		t.Fatalf("cancelled batch's output: %d lines, want 5", len(got))
	}

	// bounds: refused before anything is stored or charged
	before, _ = s.gw.Quota("ada")
	_, err = ada.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(1001, "gpt-4o-mini")), "many.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if e := sdkError(t, err); e.StatusCode != http.StatusBadRequest || e.Code != "too_many_lines" {
		t.Fatalf("1001 lines: %d %s %s", e.StatusCode, e.Code, e.Message)
	}
	big := bytes.Repeat([]byte("x"), 300<<10)
	_, err = ada.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(big), "big.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if e := sdkError(t, err); e.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("300 KiB file: %d %s", e.StatusCode, e.Message)
	}
	page, err := ada.Files.List(ctx, openai.FileListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pf := range page.Data {
		if pf.Filename == "many.jsonl" || pf.Filename == "big.jsonl" {
			t.Fatalf("a refused upload was kept: %+v", pf)
		}
	}
	if q, _ := s.gw.Quota("ada"); q != before {
		t.Fatalf("refused uploads moved money: %d -> %d", before, q)
	}
	// one account's files together are bounded too
	hoarder := s.openai(s.gw.AddUser("hoarder", start))
	chunk := bytes.Repeat([]byte("y"), 200<<10)
	for i := 0; ; i++ {
		_, err := hoarder.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chunk), "chunk.jsonl", "application/jsonl"), Purpose: "user_data"})
		if err == nil {
			if i > 5 {
				t.Fatal("more than 1MB of files kept for one account")
			}
			continue
		}
		if e := sdkError(t, err); e.StatusCode != http.StatusRequestEntityTooLarge || e.Code != "storage_limit_exceeded" || i < 4 {
			t.Fatalf("upload %d: %d %s %s", i, e.StatusCode, e.Code, e.Message)
		}
		break
	}
	// a batch of a model the key cannot afford is refused whole, in OpenAI's shape
	poor := s.openai(s.gw.AddUser("poor", 10))
	pf, err := poor.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(100, "gpt-4o-mini")), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	_, err = poor.Batches.New(ctx, openai.BatchNewParams{InputFileID: pf.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if e := sdkError(t, err); e.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a batch beyond the balance: %d %s", e.StatusCode, e.Message)
	}
	if q, _ := s.gw.Quota("poor"); q != 10 {
		t.Fatalf("a refused batch moved money: %d", q)
	}
	// deleting a file
	if del, err := ada.Files.Delete(ctx, f2.ID); err != nil || !del.Deleted {
		t.Fatalf("delete: %v %+v", err, del)
	}
	if _, err := ada.Files.Get(ctx, f2.ID); sdkError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted file: %v", err)
	}
}

func TestBatchesAnthropic(t *testing.T) {
	s := startBatches(t)
	ctx := context.Background()
	const start = 10_000_000
	key := s.gw.AddUser("ada", start)
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	other := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(s.gw.AddUser("bob", start)), aoption.WithMaxRetries(0))
	reqs := make([]anthropic.MessageBatchNewParamsRequest, 20)
	for i := range reqs {
		reqs[i] = anthropic.MessageBatchNewParamsRequest{CustomID: fmt.Sprintf("q%d", i), Params: anthropic.MessageBatchNewParamsRequestParams{
			Model: "claude-haiku", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("hi %d", i)))}}}
	}
	s.fake.Hold(true)
	b, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	if b.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress || b.RequestCounts.Processing != 20 {
		t.Fatalf("new batch: %+v", b)
	}
	if _, err := other.Messages.Batches.Get(ctx, b.ID, anthropic.MessageBatchGetParams{}); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "not_found_error") {
		t.Fatalf("another user's batch: %v", err)
	}
	s.fake.Hold(false)
	eventually(t, "the message batch ended", func() bool {
		got, err := ac.Messages.Batches.Get(ctx, b.ID, anthropic.MessageBatchGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		return got.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
	stream := ac.Messages.Batches.ResultsStreaming(ctx, b.ID, anthropic.MessageBatchResultsParams{})
	var n int
	for stream.Next() {
		r := stream.Current()
		if r.Result.Type != "succeeded" || r.Result.Message.Usage.InputTokens == 0 {
			t.Fatalf("result %+v", r)
		}
		n++
	}
	if err := stream.Err(); err != nil || n != 20 {
		t.Fatalf("results: %d lines, err %v", n, err)
	}
	var want int64
	for i := range 20 {
		want += lineCost(i, 500_000, 2_500_000)
	}
	if q, _ := s.gw.Quota("ada"); q != start-want {
		t.Fatalf("quota %d, want %d", q, start-want)
	}
	page, err := ac.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
		t.Fatalf("list: %v %+v", err, page)
	}

	// bounds and mistakes, refused in Anthropic's shape before anything is charged
	before, _ := s.gw.Quota("ada")
	many := make([]anthropic.MessageBatchNewParamsRequest, 1001)
	for i := range many {
		many[i] = reqs[0]
		many[i].CustomID = fmt.Sprintf("m%d", i)
	}
	mixed := append([]anthropic.MessageBatchNewParamsRequest{}, reqs[:2]...)
	mixed[1].Params.Model = "gpt-4o-mini"
	for _, tc := range []struct {
		reqs []anthropic.MessageBatchNewParamsRequest
		want string
	}{{many, "more than 1000 requests"}, {mixed, "a batch runs one model"}} {
		_, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: tc.reqs})
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "invalid_request_error") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("want a 400 saying %q, got %v", tc.want, err)
		}
	}
	if q, _ := s.gw.Quota("ada"); q != before {
		t.Fatalf("refused batches moved money: %d -> %d", before, q)
	}

	// a cancel: half the requests answered and billed, the rest refunded
	s.fake.Hold(true)
	b2, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs[:10]})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the batch at the vendor", func() bool { return s.fake.Creates() == 2 })
	if _, err := ac.Messages.Batches.Cancel(ctx, b2.ID, anthropic.MessageBatchCancelParams{}); err != nil {
		t.Fatal(err)
	}
	var ended *anthropic.MessageBatch
	eventually(t, "the cancelled batch ended", func() bool {
		ended, err = ac.Messages.Batches.Get(ctx, b2.ID, anthropic.MessageBatchGetParams{})
		return err == nil && ended.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
	if ended.RequestCounts.Succeeded != 5 || ended.RequestCounts.Canceled != 5 {
		t.Fatalf("cancelled batch's counts: %+v", ended.RequestCounts)
	}
	var half int64
	for i := range 5 {
		half += lineCost(i, 500_000, 2_500_000)
	}
	if q, _ := s.gw.Quota("ada"); q != before-half {
		t.Fatalf("after the cancel: quota %d, want %d", q, before-half)
	}
}

// A batch at the vendor across a reload and a SIGKILL: followed on by the
// next configuration and by the restarted process, submitted once, billed
// once.
func TestBatchesSurviveReloadAndKill(t *testing.T) {
	s := startBatches(t)
	ctx := context.Background()
	const start = 10_000_000
	ada := s.openai(s.gw.AddUser("ada", start))
	run := func(n int) string {
		f, err := ada.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(n, "gpt-4o-mini")), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ada.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	var per int64
	for i := range 50 {
		per += lineCost(i, 75_000, 300_000)
	}

	s.fake.Hold(true)
	id := run(50)
	eventually(t, "the batch polled at the vendor", func() bool { return s.fake.Creates() == 1 && s.fake.Polls() > 0 })
	s.gw.Reload(s.cfg.option("max_attempts 3").String(), s.vars)
	s.fake.Hold(false)
	waitBatch(t, ada, id, openai.BatchStatusCompleted)
	if q, _ := s.gw.Quota("ada"); q != start-per {
		t.Fatalf("after a reload mid-batch: quota %d, want %d", q, start-per)
	}

	s.fake.Hold(true)
	id = run(50)
	eventually(t, "the second batch polled at the vendor", func() bool { return s.fake.Creates() == 2 })
	polls := s.fake.Polls()
	eventually(t, "a poll of the second batch", func() bool { return s.fake.Polls() > polls })
	s.gw.Kill()
	s.fake.Hold(false)
	s.gw.Restart()
	waitBatch(t, ada, id, openai.BatchStatusCompleted)
	if q, _ := s.gw.Quota("ada"); q != start-2*per {
		t.Fatalf("after a SIGKILL mid-batch: quota %d, want %d", q, start-2*per)
	}
	if c := s.fake.Creates(); c != 2 {
		t.Fatalf("the vendor got %d batches for 2", c)
	}
	rows := s.gw.WaitUsage("ada", 100)
	var n int
	var sum int64
	for _, r := range rows {
		if r.Endpoint == "/v1/batches" {
			n++
			sum += r.Cost
		}
	}
	if n != 100 || sum != 2*per {
		t.Fatalf("%d usage rows summing %d, want 100 summing %d", n, sum, 2*per)
	}
}

// Two instances on one database and one files directory: batches created
// on either are each submitted to the vendor once and billed once.
func TestBatchesTwoInstances(t *testing.T) {
	s := startBatches(t)
	gw2 := s.second(t)
	ctx := context.Background()
	const start = 10_000_000
	key := s.gw.AddUser("ada", start)
	clients := []openai.Client{s.openai(key),
		openai.NewClient(option.WithBaseURL(gw2.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))}
	s.fake.Hold(true)
	const n = 6
	ids := make([]string, n)
	for i := range n {
		c := clients[i%2]
		f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(20, "gpt-4o-mini")), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = b.ID
	}
	eventually(t, "every batch at the vendor", func() bool { return s.fake.Creates() == n })
	s.fake.Hold(false)
	for i, id := range ids {
		waitBatch(t, clients[(i+1)%2], id, openai.BatchStatusCompleted)
	}
	var per int64
	for i := range 20 {
		per += lineCost(i, 75_000, 300_000)
	}
	if q, _ := s.gw.Quota("ada"); q != start-n*per {
		t.Fatalf("quota %d, want %d", q, start-n*per)
	}
	if c := s.fake.Creates(); c != n {
		t.Fatalf("the vendor got %d batches for %d", c, n)
	}
	if rows := s.gw.WaitUsage("ada", n*20); len(rows) != n*20 {
		t.Fatalf("%d usage rows, want %d", len(rows), n*20)
	}
}

// Azure OpenAI's batch API (OpenAI's wire under /openai, api-key,
// api-version) behind the same /v1/batches: chat and embeddings lines.
func TestBatchesAzure(t *testing.T) {
	s := startBatches(t)
	ctx := context.Background()
	const start = 10_000_000
	c := s.openai(s.gw.AddUser("ada", start))
	var embed bytes.Buffer
	for i := range 30 {
		fmt.Fprintf(&embed, `{"custom_id":"e%d","method":"POST","url":"/v1/embeddings","body":{"model":"text-embedding-batch","input":"text %d"}}`+"\n", i, i)
	}
	var want int64
	for _, job := range []struct {
		lines    []byte
		endpoint openai.BatchNewParamsEndpoint
		cost     func(i int) int64
		n        int
	}{
		{chatLines(40, "gpt-4o-batch"), openai.BatchNewParamsEndpointV1ChatCompletions, func(i int) int64 { return lineCost(i, 1_250_000, 5_000_000) }, 40},
		{embed.Bytes(), openai.BatchNewParamsEndpointV1Embeddings, func(i int) int64 { return lineCost(i, 65_000, 0) }, 30},
	} {
		f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(job.lines), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: job.endpoint, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		done := waitBatch(t, c, b.ID, openai.BatchStatusCompleted)
		if done.RequestCounts.Completed != int64(job.n) || len(fileLines(t, c, done.OutputFileID)) != job.n {
			t.Fatalf("%s: %+v", job.endpoint, done.RequestCounts)
		}
		for i := range job.n {
			want += job.cost(i)
		}
	}
	if q, _ := s.gw.Quota("ada"); q != start-want {
		t.Fatalf("quota %d, want %d", q, start-want)
	}
	if s.fake.AzureCalls() == 0 {
		t.Fatal("no call reached Azure's addresses")
	}
}

// Files past file_retention are gone: a 404 at once, their bytes deleted
// by the sweep.
func TestFilesRetention(t *testing.T) {
	fake := gatewaytest.NewFakeBatchVendor(t, "sk-up-batches")
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	cfg := batchConfig().option(block("batches", "dir {{FILES}}", "file_retention 1s"))
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": fake.URL, "FILES": files})
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(gw.AddUser("ada", 1_000_000)), option.WithMaxRetries(0))
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(3, "gpt-4o-mini")), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if f.ExpiresAt == 0 {
		t.Fatalf("a file under a retention has no expires_at: %+v", f)
	}
	if _, err := os.Stat(filepath.Join(files, f.ID)); err != nil {
		t.Fatalf("the file's bytes: %v", err)
	}
	eventually(t, "the file expired", func() bool {
		_, err := c.Files.Get(ctx, f.ID)
		return err != nil && sdkError(t, err).StatusCode == http.StatusNotFound
	})
	eventually(t, "the file's bytes deleted", func() bool {
		_, err := os.Stat(filepath.Join(files, f.ID))
		return os.IsNotExist(err)
	})
}

// A model with no batch API on any of its channels (the local demo echo
// here) runs its batch's lines on the gateway's own engine, in either
// dialect, each line billed from its answer's usage at the batch price.
func TestBatchesLocal(t *testing.T) {
	s := startBatches(t)
	ctx := context.Background()
	const start = 10_000_000
	key := s.gw.AddUser("ada", start)
	c := s.openai(key)
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(chatLines(30, "demo")), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	done := waitBatch(t, c, b.ID, openai.BatchStatusCompleted)
	if done.RequestCounts.Completed != 30 {
		t.Fatalf("counts %+v", done.RequestCounts)
	}
	var want int64
	ids := map[string]bool{}
	for _, line := range fileLines(t, c, done.OutputFileID) {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                   `json:"status_code"`
				Body       openai.ChatCompletion `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Response.StatusCode != 200 || len(l.Response.Body.Choices) != 1 {
			t.Fatalf("output line %s: %v", line, err)
		}
		u := l.Response.Body.Usage
		if u.PromptTokens == 0 || u.CompletionTokens == 0 {
			t.Fatalf("a line without usage: %s", line)
		}
		ids[l.CustomID] = true
		want += (u.PromptTokens*500_000 + u.CompletionTokens*1_000_000 + 999_999) / 1_000_000
	}
	if len(ids) != 30 {
		t.Fatalf("%d distinct lines answered", len(ids))
	}
	if q, _ := s.gw.Quota("ada"); q != start-want {
		t.Fatalf("quota %d, want %d", q, start-want)
	}

	// a line the engine refuses is an error line, and costs nothing
	before, _ := s.gw.Quota("ada")
	mixed := append(chatLines(1, "demo"), []byte(`{"custom_id":"bad","method":"POST","url":"/v1/chat/completions","body":{"model":"demo","messages":"not a list"}}`+"\n")...)
	f2, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(mixed), "mixed.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f2.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	done2 := waitBatch(t, c, b2.ID, openai.BatchStatusCompleted)
	errLines := fileLines(t, c, done2.ErrorFileID)
	if done2.RequestCounts.Completed != 1 || done2.RequestCounts.Failed != 1 || len(errLines) != 1 || !strings.Contains(errLines[0], `"status_code":400`) {
		t.Fatalf("a batch with a bad line: %+v %v", done2.RequestCounts, errLines)
	}
	var one int64
	for _, line := range fileLines(t, c, done2.OutputFileID) {
		var l struct {
			Response struct {
				Body openai.ChatCompletion `json:"body"`
			} `json:"response"`
		}
		_ = json.Unmarshal([]byte(line), &l)
		u := l.Response.Body.Usage
		one += (u.PromptTokens*500_000 + u.CompletionTokens*1_000_000 + 999_999) / 1_000_000
	}
	if q, _ := s.gw.Quota("ada"); one == 0 || q != before-one {
		t.Fatalf("quota %d, want %d", q, before-one)
	}

	// an Anthropic batch of the same model, translated line by line
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	reqs := make([]anthropic.MessageBatchNewParamsRequest, 5)
	for i := range reqs {
		reqs[i] = anthropic.MessageBatchNewParamsRequest{CustomID: fmt.Sprintf("q%d", i), Params: anthropic.MessageBatchNewParamsRequestParams{
			Model: "demo", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}}
	}
	before, _ = s.gw.Quota("ada")
	ab, err := ac.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the local message batch ended", func() bool {
		got, err := ac.Messages.Batches.Get(ctx, ab.ID, anthropic.MessageBatchGetParams{})
		return err == nil && got.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded
	})
	stream := ac.Messages.Batches.ResultsStreaming(ctx, ab.ID, anthropic.MessageBatchResultsParams{})
	var cost int64
	n := 0
	for stream.Next() {
		r := stream.Current()
		u := r.Result.Message.Usage
		if r.Result.Type != "succeeded" || u.OutputTokens == 0 {
			t.Fatalf("result %+v", r)
		}
		cost += ((u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens)*500_000 + u.OutputTokens*1_000_000 + 999_999) / 1_000_000
		n++
	}
	if stream.Err() != nil || n != 5 {
		t.Fatalf("%d results, %v", n, stream.Err())
	}
	if q, _ := s.gw.Quota("ada"); q != before-cost {
		t.Fatalf("quota %d, want %d", q, before-cost)
	}
}
