package integration

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

func chatParams(model, prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(prompt)},
	}
}

func TestChatBillsToTheUnit(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("alice", 1_000_000)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens, b.CachedTokens = 1000, 2000, 400 })

	resp, err := s.client(key).Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello from the fake upstream" {
		t.Fatalf("content = %q", got)
	}
	if resp.Usage.PromptTokens != 1000 || resp.Usage.CompletionTokens != 2000 {
		t.Fatalf("usage = %+v", resp.Usage)
	}
	// 600 uncached * 0.15 + 400 cached * 0.075 + 2000 * 0.60 = 90 + 30 + 1200
	const want = 1320
	rows := s.gw.WaitUsage("alice", 1)
	if r := rows[0]; r.Cost != want || r.PromptTokens != 1000 || r.CompletionTokens != 2000 || r.Status != 200 || r.Channel != "primary" || r.Estimated {
		t.Fatalf("usage row = %+v, want cost %d from primary", r, want)
	}
	quota, used := s.gw.Quota("alice")
	if quota != 1_000_000-want || used != want {
		t.Fatalf("quota %d used %d, want %d and %d", quota, used, 1_000_000-want, want)
	}

	// the upstream got the client's body with the key swapped
	req := s.primary.Requests()[0]
	if req.Header.Get("Authorization") != "Bearer sk-up-1" {
		t.Fatalf("upstream saw Authorization %q", req.Header.Get("Authorization"))
	}
	if strings.Contains(string(req.Raw), key) {
		t.Fatal("the gateway key reached the upstream")
	}
}

func TestChatModelMapAndRounding(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("bob", 1_000_000)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens = 7, 3 })
	if _, err := s.client(key).Chat.Completions.New(context.Background(), chatParams("mini-alias", "hi")); err != nil {
		t.Fatal(err)
	}
	if got := s.primary.Requests()[0].Body["model"]; got != "gpt-4o-mini" {
		t.Fatalf("upstream model = %v, want the mapped gpt-4o-mini", got)
	}
	// 7*0.15 + 3*0.6 = 1.05 + 1.8 = 2.85 units -> rounded up to 3
	if r := s.gw.WaitUsage("bob", 1)[0]; r.Cost != 3 || r.Model != "mini-alias" {
		t.Fatalf("row = %+v, want cost 3 for mini-alias", r)
	}
}

func TestChatStreaming(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("carol", 1_000_000)
	reply := "one two three four five"
	s.primary.Set(func(b *gatewaytest.Behavior) { b.Reply = reply })
	client := s.client(key)

	t.Run("without usage", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini", "count"))
		var text strings.Builder
		chunks := 0
		for stream.Next() {
			c := stream.Current()
			chunks++
			if len(c.Choices) == 0 {
				t.Fatalf("the client got a usage chunk it did not ask for: %s", c.RawJSON())
			}
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != reply || chunks != gatewaytest.StreamChunks(reply) {
			t.Fatalf("got %q in %d chunks, want %q in %d", text.String(), chunks, reply, gatewaytest.StreamChunks(reply))
		}
		// the gateway asked the upstream for usage anyway, to bill on it
		up := s.primary.Requests()[len(s.primary.Requests())-1]
		so, _ := up.Body["stream_options"].(map[string]any)
		if so["include_usage"] != true {
			t.Fatalf("upstream body %s lacks stream_options.include_usage", up.Raw)
		}
	})
	t.Run("with usage", func(t *testing.T) {
		p := chatParams("gpt-4o-mini", "count")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(context.Background(), p)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Usage.PromptTokens != 10 || acc.Usage.CompletionTokens != 20 {
			t.Fatalf("usage = %+v", acc.Usage)
		}
		if acc.Choices[0].Message.Content != reply {
			t.Fatalf("content = %q", acc.Choices[0].Message.Content)
		}
	})
	// 10*0.15 + 20*0.6 = 13.5 -> 14 units each
	rows := s.gw.WaitUsage("carol", 2)
	for _, r := range rows {
		if r.Cost != 14 || !r.Stream || r.Estimated {
			t.Fatalf("row = %+v, want cost 14 streamed", r)
		}
	}
}

func TestCompletionsAndEmbeddings(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("dave", 1_000_000)
	client := s.client(key)
	ctx := context.Background()

	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:  "gpt-3.5-turbo-instruct",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text != "Hello from the fake upstream" {
		t.Fatalf("completion = %q", comp.Choices[0].Text)
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || len(emb.Data[1].Embedding) != 8 || float32(emb.Data[1].Embedding[3]) != gatewaytest.FakeVector(1, 3, 8) {
		t.Fatalf("float embeddings = %+v", emb.Data)
	}

	emb64, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:          "text-embedding-3-small",
		Input:          openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a")},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Dimensions:     openai.Int(4),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b64 string
	if err := json.Unmarshal([]byte(emb64.Data[0].JSON.Embedding.Raw()), &b64); err != nil {
		t.Fatalf("base64 embedding is not a string: %s", emb64.Data[0].JSON.Embedding.Raw())
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 16 {
		t.Fatalf("base64 embedding %q: %v", b64, err)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])); v != gatewaytest.FakeVector(0, 1, 4) {
		t.Fatalf("component 1 = %v", v)
	}
	last := s.primary.Requests()[len(s.primary.Requests())-1]
	if last.Body["dimensions"] != float64(4) || last.Body["encoding_format"] != "base64" {
		t.Fatalf("upstream body %s lost dimensions or encoding_format", last.Raw)
	}

	// the engines path names the model in the URL
	resp, body := s.gw.Do(http.MethodPost, "/v1/engines/text-embedding-3-small/embeddings", key, []byte(`{"input":"hello"}`), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"embedding"`) {
		t.Fatalf("engines path: %d %s", resp.StatusCode, body)
	}
	last = s.primary.Requests()[len(s.primary.Requests())-1]
	if last.Path != "/v1/embeddings" || last.Body["model"] != "text-embedding-3-small" {
		t.Fatalf("engines request reached upstream as %s %s", last.Path, last.Raw)
	}

	rows := s.gw.WaitUsage("dave", 4)
	// completion: 10*1.5 + 20*2 = 55; embeddings: 10*0.02 = 0.2 -> 1
	wantCost := []int64{55, 1, 1, 1}
	for i, r := range rows {
		if r.Cost != wantCost[i] {
			t.Fatalf("row %d = %+v, want cost %d", i, r, wantCost[i])
		}
	}
}

func TestModelsList(t *testing.T) {
	s := startOpenAI(t)
	all := s.gw.AddUser("erin", 1_000_000)
	limited := s.gw.AddToken("erin", "--models", "gpt-4o-mini,text-embedding-3-small")
	ids := func(key string) []string {
		page, err := s.client(key).Models.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range page.Data {
			out = append(out, m.ID)
		}
		return out
	}
	if got := strings.Join(ids(all), ","); got != "gpt-3.5-turbo-instruct,gpt-4o-mini,mini-alias,text-embedding-3-small,unpriced-model" {
		t.Fatalf("models = %s", got)
	}
	if got := strings.Join(ids(limited), ","); got != "gpt-4o-mini,text-embedding-3-small" {
		t.Fatalf("limited key sees %s", got)
	}
}

func TestFailover(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("frank", 1_000_000)
	client := s.client(key, option.WithMaxRetries(0))

	s.primary.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 503 })
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello from the backup" {
		t.Fatalf("content = %q, want the backup's", resp.Choices[0].Message.Content)
	}
	s.primary.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 429 })
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini", "hi"))
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if stream.Err() != nil || text.String() != "Hello from the backup" {
		t.Fatalf("stream after 429: %q, %v", text.String(), stream.Err())
	}
	// an unreachable primary fails over too
	s.primary.Close()
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
		t.Fatalf("with the primary down: %v", err)
	}
	rows := s.gw.WaitUsage("frank", 3)
	for _, r := range rows {
		if r.Channel != "backup" || r.Cost != 14 {
			t.Fatalf("row = %+v, want billed once on backup", r)
		}
	}
	// a client error is not retried elsewhere and keeps its status
	s.backup.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 400 })
	before := len(s.backup.Requests())
	_, err = client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || len(s.backup.Requests()) != before+1 {
		t.Fatalf("err = %v", err)
	}
}

// TestChannelKeyRefused: an upstream that refuses the channel's key is a
// channel failure: the next channel answers, and when none is left the
// client sees a 502 that does not blame its own key or quote the upstream.
func TestChannelKeyRefused(t *testing.T) {
	t.Setenv("GATEWAY_TEST_UPSTREAM_KEY", "sk-up-1")
	primary := gatewaytest.NewFakeOpenAI(t, "sk-up-1-rotated") // the channel's key is stale
	backup := gatewaytest.NewFakeOpenAI(t, "sk-up-2")
	gw := gatewaytest.Start(t, openaiConfig().String(), gatewaytest.Vars{"UP1": primary.URL, "UP2": backup.URL})
	key := gw.AddUser("lena", 1_000_000)
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
		t.Fatalf("the backup should have answered: %v", err)
	}
	_, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a")}})
	e := apiError(t, err, 502, "")
	if strings.Contains(e.Message, "Incorrect API key") || !strings.Contains(e.Message, "credentials") {
		t.Fatalf("message = %q", e.Message)
	}
}

func TestStreamBreaksAfterFirstByte(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("gina", 1_000_000)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.Reply = "a b c d e f g h"; b.BreakAfter = 3 })
	stream := s.client(key).Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini", "hi"))
	n := 0
	for stream.Next() {
		n++
	}
	if n != 3 {
		t.Fatalf("got %d chunks before the break, want 3", n)
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "broke off") {
		t.Fatalf("a broken stream must end with an error the SDK raises, got %v", err)
	}
	// no failover after the first byte; the partial answer is billed by estimate
	if len(s.backup.Requests()) != 0 {
		t.Fatal("the request was retried on another channel after bytes were sent")
	}
	r := s.gw.WaitUsage("gina", 1)[0]
	if r.Status != 502 || !r.Estimated || r.Cost == 0 || r.CompletionTokens == 0 {
		t.Fatalf("row = %+v, want an estimated charge with status 502", r)
	}
}

// TestDisconnectMidStreamStillBills: with stream_drain_timeout off, a
// client that leaves mid-stream ends the upstream's stream at once, and
// the cut answer is billed by estimate (drain_test.go has the default,
// which reads on for the upstream's final usage).
func TestDisconnectMidStreamStillBills(t *testing.T) {
	s := startOpenAIWith(t, openaiConfig().option("stream_drain_timeout off"))
	key := s.gw.AddUser("hank", 1_000_000)
	s.primary.Set(func(b *gatewaytest.Behavior) {
		b.Reply = strings.Repeat("word ", 50)
		b.ChunkDelay = 20 * time.Millisecond
		b.NoUsage = true
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := s.client(key).Chat.Completions.NewStreaming(ctx, chatParams("gpt-4o-mini", "talk"))
	n := 0
	for stream.Next() {
		if n++; n == 5 {
			cancel()
		}
	}
	r := s.gw.WaitUsage("hank", 1)[0]
	if !r.Estimated || r.Cost == 0 || r.CompletionTokens == 0 || r.PromptTokens == 0 {
		t.Fatalf("row = %+v, want an estimated, non-zero charge", r)
	}
	if r.CompletionTokens >= 50 {
		t.Fatalf("billed %d completion tokens for a stream cut after 5 chunks", r.CompletionTokens)
	}
	// the upstream request was cancelled too, well before its 50 words
	if s.primary.Cancelled() != 1 {
		t.Fatalf("the upstream saw %d cancelled streams, want 1", s.primary.Cancelled())
	}
	_, used := s.gw.Quota("hank")
	if used != r.Cost {
		t.Fatalf("used quota %d, row cost %d", used, r.Cost)
	}
}

func TestNoUsageIsEstimated(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("ivy", 1_000_000)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.NoUsage = true; b.Reply = "hello world" })
	if _, err := s.client(key).Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hello world")); err != nil {
		t.Fatal(err)
	}
	stream := s.client(key).Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini", "hello world"))
	for stream.Next() {
	}
	if stream.Err() != nil {
		t.Fatal(stream.Err())
	}
	for _, r := range s.gw.WaitUsage("ivy", 2) {
		// o200k: "hello world" is 2 tokens; prompt: 2 messages of (3 + n) + 3
		if !r.Estimated || r.CompletionTokens != 2 || r.PromptTokens != (3+2)+(3+2)+3 {
			t.Fatalf("row = %+v, want estimated 13 prompt and 2 completion tokens", r)
		}
	}
}

// An answer past net/http's 2 KB buffer goes out with its Content-Length,
// whole, not chunked.
func TestChatAnswerHasItsLength(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("len", 1_000_000)
	reply := strings.Repeat("long answer ", 500)
	s.primary.Set(func(b *gatewaytest.Behavior) { b.Reply = reply })
	resp, body := s.gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), reply) {
		t.Fatalf("%d %.200s", resp.StatusCode, body)
	}
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
		t.Fatalf("Content-Length %d, Transfer-Encoding %v, for a body of %d bytes", resp.ContentLength, resp.TransferEncoding, len(body))
	}
}
