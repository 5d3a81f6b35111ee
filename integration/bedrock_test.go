package integration

// Amazon Bedrock (channel type bedrock): the three SDKs reach a Claude and
// a Nova model through Converse and ConverseStream, signed with SigV4 (a
// session token included) or sent with a Bedrock API key; Bedrock's errors
// in each client's shape; a client that leaves mid-stream; failover to an
// Anthropic channel serving the same model.

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

const (
	bedrockRegion = "eu-west-3"
	// the Claude channel signs with a temporary key pair and its session token
	bedrockAKID    = "ASIAFAKEBEDROCKKEY01"
	bedrockSecret  = "fakeSecretKeyForBedrockTests/0123456789ab"
	bedrockToken   = "IQoJb3JpZ2luX2VjEFakeSessionTokenForBedrockTests"
	bedrockAPIKey  = "ABSKQmVkcm9ja0FQSUtleS1mYWtlLWtleS1mb3ItdGVzdHM="
	bedrockClaude  = "anthropic.claude-3-5-haiku-20241022-v1:0"
	bedrockNova    = "us.amazon.nova-lite-v1:0" // an inference profile id
	bedrockClaudeN = "claude-bedrock"           // the friendly name model_map gives it
)

type bedrockSetup struct {
	gw   *gatewaytest.Gateway
	fake *gatewaytest.FakeBedrock
	ant  *gatewaytest.FakeAnthropic
}

// bedrockConfig: two Bedrock channels on one fake (Claude by SigV4 with a
// session token, named through model_map; Nova by API key, by its
// inference profile id). Prices: Claude 0.80/4/0.08, Nova 0.06/0.24/0.015.
func bedrockConfig() *caddyfile {
	return gatewayConfig().
		channel("br-claude", block("bedrock", "region "+bedrockRegion), "{{BR}}", bedrockAKID+":"+bedrockSecret+":"+bedrockToken,
			bedrockClaude, "model_map "+bedrockClaudeN+" "+bedrockClaude, "priority 10").
		channel("br-nova", block("bedrock", "region "+bedrockRegion), "{{BR}}", bedrockAPIKey, bedrockNova).
		price(bedrockClaudeN, "input 0.80", "output 4", "cached_input 0.08").
		price(bedrockClaude, "input 0.80", "output 4", "cached_input 0.08").
		price(bedrockNova, "input 0.06", "output 0.24", "cached_input 0.015")
}

func startBedrock(t *testing.T, cfg *caddyfile) *bedrockSetup {
	t.Helper()
	s := &bedrockSetup{
		fake: gatewaytest.NewFakeBedrock(t, bedrockRegion, aws.Credentials{AccessKeyID: bedrockAKID, SecretAccessKey: bedrockSecret, SessionToken: bedrockToken}, bedrockAPIKey),
		ant:  gatewaytest.NewFakeAnthropic(t, "sk-ant-up"),
	}
	for _, f := range []gatewaytest.Fake{s.fake, s.ant} {
		f.Set(func(b *gatewaytest.Behavior) {
			b.Reply, b.PromptTokens, b.CachedTokens, b.CompletionTokens = "Hello there", fakePrompt, fakeCached, fakeCompletion
		})
	}
	s.gw = gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"BR": s.fake.URL, "ANT": s.ant.URL})
	return s
}

// TestBedrockDialects: the OpenAI, Anthropic and Gemini SDKs hold a
// two-turn tool conversation (an image, a system prompt, parallel calls)
// with a Claude and a Nova model on Bedrock, streamed and not, and each
// turn is billed Bedrock's own counts to the unit: 30 fresh + 5 cached
// prompt tokens and 12 out, Claude 30*0.80 + 5*0.08 + 12*4 = 72.4 -> 73,
// Nova 30*0.06 + 5*0.015 + 12*0.24 = 4.755 -> 5 units.
func TestBedrockDialects(t *testing.T) {
	s := startBedrock(t, bedrockConfig())
	models := []struct {
		asked, upstream, channel, auth string
		cost                           int64
	}{
		{bedrockClaudeN, bedrockClaude, "br-claude", "AWS4-HMAC-SHA256 Credential=" + bedrockAKID + "/", 73},
		{bedrockNova, bedrockNova, "br-nova", "Bearer " + bedrockAPIKey, 5},
	}
	clients := []struct {
		name string
		run  func(t *testing.T, key, model, system string, stream bool) conversation
	}{
		{"anthropic", func(t *testing.T, key, model, system string, stream bool) conversation {
			return anthropicConversation(t, s.gw, key, model, system, stream)
		}},
		{"gemini", func(t *testing.T, key, model, system string, stream bool) conversation {
			return geminiConversation(t, s.gw, key, model, "", system, stream)
		}},
		{"openai", func(t *testing.T, key, model, system string, stream bool) conversation {
			return openaiConversation(t, s.gw, key, model, system, stream)
		}},
	}
	for _, c := range clients {
		for _, m := range models {
			for _, stream := range []bool{false, true} {
				name := c.name + " to " + m.asked
				if stream {
					name += " streaming"
				}
				t.Run(name, func(t *testing.T) {
					user := strings.NewReplacer(" ", "-", ":", "-", ".", "-").Replace(name)
					key := s.gw.AddUser(user, 10_000_000)
					system := systemPrompt + " [" + user + "]"
					conv := c.run(t, key, m.asked, system, stream)
					want := gatewaytest.WeatherCalls
					if len(conv.calls) != len(want) {
						t.Fatalf("turn 1 calls %v, want %v", conv.calls, want)
					}
					for i, call := range conv.calls {
						if call.Name != want[i].Name || !sameJSON(call.Args, want[i].Args) {
							t.Errorf("call %d = %v, want %v", i, call, want[i])
						}
					}
					if conv.text1 != gatewaytest.ToolText || conv.text2 != "Weather: 18C, 21C." {
						t.Errorf("texts %q, %q", conv.text1, conv.text2)
					}
					var reqs []gatewaytest.Recorded
					for _, r := range s.fake.Requests() {
						if r.System == system {
							reqs = append(reqs, r)
						}
					}
					if len(reqs) != 2 {
						t.Fatalf("Bedrock got %d requests, want 2", len(reqs))
					}
					for _, r := range reqs {
						wantPath := "/model/" + m.upstream + "/converse"
						if stream {
							wantPath += "-stream"
						}
						if r.Path != wantPath || r.Model != m.upstream || !strings.HasPrefix(r.Header.Get("Authorization"), m.auth) {
							t.Errorf("Bedrock got %s (model %s) with Authorization %.40q", r.Path, r.Model, r.Header.Get("Authorization"))
						}
					}
					if reqs[0].Prompt != userPrompt || string(reqs[0].Image) != string(testPNG) {
						t.Errorf("Bedrock saw prompt %q and an image of %d bytes", reqs[0].Prompt, len(reqs[0].Image))
					}
					if strings.Join(reqs[1].Results, ",") != "18C,21C" {
						t.Errorf("Bedrock saw tool results %q", reqs[1].Results)
					}
					for _, r := range s.gw.WaitUsage(user, 2) {
						if r.PromptTokens != fakePrompt || r.CachedTokens != fakeCached || r.CompletionTokens != fakeCompletion ||
							r.Cost != m.cost || r.Estimated || r.Status != 200 || r.Channel != m.channel || r.Stream != stream ||
							!strings.HasPrefix(r.UpstreamRequestID, "fake-bedrock-") {
							t.Errorf("usage row %+v", r)
						}
					}
				})
			}
		}
	}
}

// TestBedrockErrors: each of Bedrock's errors reaches the client with the
// status and retry advice it means, in the client's shape, at no cost; a
// stream an exception cuts after it started is billed what it generated.
func TestBedrockErrors(t *testing.T) {
	s := startBedrock(t, bedrockConfig())
	key := s.gw.AddUser("errs", 10_000_000)
	oc := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	for _, c := range []struct {
		status     int
		exception  string
		wantStatus int
		wantType   string // Anthropic's error type
	}{
		{400, "ValidationException", 400, "invalid_request_error"},
		{429, "ThrottlingException", 429, "rate_limit_error"},
		{403, "AccessDeniedException", 502, "api_error"},
		{429, "ModelNotReadyException", 429, "rate_limit_error"},
		{503, "ServiceUnavailableException", 503, "overloaded_error"},
	} {
		t.Run(c.exception, func(t *testing.T) {
			s.fake.Set(func(b *gatewaytest.Behavior) { b.FailStatus = c.status })
			s.fake.SetBedrock(func(b *gatewaytest.BedrockBehavior) { b.Exception = c.exception })
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: bedrockNova,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			e := apiError(t, err, c.wantStatus, "")
			if c.status == 400 && !strings.Contains(e.Message, "told to fail") {
				t.Errorf("a validation error does not say what Bedrock refused: %q", e.Message)
			}
			if c.status != 400 && strings.Contains(e.Message, "told to fail") {
				t.Errorf("the upstream's words of a %s reached the client: %q", c.exception, e.Message)
			}
			_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: bedrockNova, MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != c.wantStatus || !strings.Contains(ae.RawJSON(), `"type":"`+c.wantType+`"`) {
				t.Errorf("Anthropic client got %v, want %d %s", err, c.wantStatus, c.wantType)
			}
		})
	}
	s.fake.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 0 })

	// an exception in the stream after it started ends the client's
	// stream with an error event in its shape
	s.fake.SetBedrock(func(b *gatewaytest.BedrockBehavior) { b.StreamException, b.ExceptionAfter = "throttlingException", 2 })
	st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: bedrockNova,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for st.Next() {
	}
	if err := st.Err(); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("a mid-stream throttlingException ended the stream with %v", err)
	}
	// ten refused requests and the cut stream: the stream is settled
	// before its error event goes out, so its row may be the eleventh
	// or not yet there when ten are (CI saw both)
	cut := 0
	for _, r := range s.gw.WaitUsage("errs", 11) {
		switch {
		case r.Stream:
			// cut after it started: billed on what it generated
			cut++
			if r.Status == 200 || !r.Estimated || r.CompletionTokens == 0 || r.Cost == 0 {
				t.Errorf("the cut stream's row: %+v", r)
			}
		case r.Status != 200 && r.Cost != 0:
			t.Errorf("a refused request was charged: %+v", r)
		}
	}
	if cut != 1 {
		t.Errorf("%d rows of the cut stream", cut)
	}
}

// TestBedrockFailover: a Bedrock channel whose stream fails at its first
// event (a throttlingException frame), or whose call fails with a 503,
// hands the request to the Anthropic channel serving the same model, and
// the client never sees the failure.
func TestBedrockFailover(t *testing.T) {
	// an Anthropic channel serves claude-bedrock too, at a lower priority
	s := startBedrock(t, bedrockConfig().channel("claude-direct", "anthropic", "{{ANT}}", "sk-ant-up", bedrockClaudeN, "priority 1"))
	key := s.gw.AddUser("fo", 10_000_000)
	oc := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: bedrockClaudeN, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}

	s.fake.SetBedrock(func(b *gatewaytest.BedrockBehavior) {
		b.StreamException, b.ExceptionAfter = "serviceUnavailableException", 0
	})
	st := oc.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := st.Err(); err != nil || text.String() != "Hello there" {
		t.Fatalf("stream: %q %v", text.String(), err)
	}
	s.fake.SetBedrock(func(b *gatewaytest.BedrockBehavior) { b.StreamException = "" })
	s.fake.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 503 })
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	resp, err := oc.Chat.Completions.New(ctx, params)
	if err != nil || resp.Choices[0].Message.Content != "Hello there" {
		t.Fatalf("answer: %v %v", resp, err)
	}
	if n := len(s.fake.Requests()); n != 2 {
		t.Errorf("Bedrock got %d requests, want 2", n)
	}
	for _, r := range s.gw.WaitUsage("fo", 2) {
		// Anthropic's counts at Claude's price: 30*0.80 + 5*0.08 + 12*4
		if r.Channel != "claude-direct" || r.Status != 200 || r.Cost != 73 {
			t.Errorf("usage row %+v", r)
		}
	}
}

// TestBedrockClientLeavesMidStream: Bedrock reports usage only in its
// last event; a client that leaves before it, from an upstream that then
// hangs, is billed (once the gateway's drain of the upstream gives up) the
// prompt and the text it was sent, counted locally, and its balance agrees
// with the row.
func TestBedrockClientLeavesMidStream(t *testing.T) {
	s := startBedrock(t, bedrockConfig().option("stream_drain_timeout 300ms"))
	words := strings.Fields(strings.Repeat("the quick brown fox jumps over the lazy dog ", 6))
	s.fake.Set(func(b *gatewaytest.Behavior) { b.Reply, b.HangAfter = strings.Join(words, " "), 1+len(words)/2 })
	key := s.gw.AddUser("leaver", 10_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+bedrockNova+`","stream":true,"messages":[{"role":"user","content":"tell me"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	sent := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sent < len(words)/2 {
		if strings.Contains(sc.Text(), `"content":"`) && !strings.Contains(sc.Text(), `"content":""`) {
			sent++
		}
	}
	cancel()
	resp.Body.Close()
	r := s.gw.WaitUsage("leaver", 1)[0]
	relayed := tokenizer.Count(bedrockNova, strings.Join(words[:sent], " "))
	if r.PromptTokens == 0 || r.CompletionTokens < int64(relayed) || r.Cost == 0 {
		t.Errorf("row %+v; want the prompt and at least the %d tokens relayed", r, relayed)
	}
	if _, used := s.gw.Quota("leaver"); used != r.Cost {
		t.Errorf("used %d, row cost %d", used, r.Cost)
	}
}

// TestBedrockCredentials: a wrong secret is refused by Bedrock's signature
// check and a wrong API key by its key check; either is the channel's
// fault (a 502 in the gateway's words, never the key), and the right ones
// work (TestBedrockDialects).
func TestBedrockCredentials(t *testing.T) {
	cfg := bedrockConfig().
		channel("br-claude", block("bedrock", "region "+bedrockRegion), "{{BR}}", bedrockAKID+":wrongSecret0123456789:"+bedrockToken,
			bedrockClaude, "model_map "+bedrockClaudeN+" "+bedrockClaude).
		channel("br-nova", block("bedrock", "region "+bedrockRegion), "{{BR}}", "ABSKwrongApiKey000000", bedrockNova)
	s := startBedrock(t, cfg)
	key := s.gw.AddUser("creds", 10_000_000)
	oc := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	for _, model := range []string{bedrockClaudeN, bedrockNova} {
		_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		e := apiError(t, err, http.StatusBadGateway, "")
		if strings.Contains(e.Message, "wrong") || strings.Contains(e.Message, "signature") {
			t.Errorf("%s: the client saw %q", model, e.Message)
		}
	}
	reqs := s.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Bedrock got %d requests", len(reqs))
	}
	if strings.Contains(s.gw.Logs(), "wrongSecret") || strings.Contains(s.gw.Logs(), bedrockToken) {
		t.Error("a credential reached the logs")
	}
}

// TestBedrockEmbeddings: OpenAI's SDK embeds through Bedrock's
// InvokeModel with Titan Text Embeddings (dimensions carried, Titan's
// token count billed) and Cohere Embed (several inputs in order, counted
// locally as Cohere reports no count), as floats and as base64.
func TestBedrockEmbeddings(t *testing.T) {
	s := startBedrock(t, bedrockConfig().
		channel("br-embed", block("bedrock", "region "+bedrockRegion), "{{BR}}", bedrockAPIKey, "amazon.titan-embed-text-v2:0 cohere.embed-english-v3").
		price("amazon.titan-embed-text-v2:0", "input 0.02").
		price("cohere.embed-english-v3", "input 0.10"))
	key := s.gw.AddUser("emb", 10_000_000)
	oc := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()

	titan, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "amazon.titan-embed-text-v2:0", Dimensions: openai.Int(256),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("What are the different services that you offer?")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(titan.Data) != 1 || len(titan.Data[0].Embedding) != 256 || titan.Data[0].Embedding[0] != 1 || titan.Usage.PromptTokens != fakePrompt {
		t.Errorf("titan: %d vectors, usage %+v", len(titan.Data), titan.Usage)
	}
	cohere, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "cohere.embed-english-v3",
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second text"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cohere.Data) != 2 || len(cohere.Data[1].Embedding) != 1024 || cohere.Data[0].Embedding[0] != 1 || cohere.Data[1].Embedding[0] != 2 {
		t.Errorf("cohere: %+v", cohere.Data)
	}
	// several inputs to Titan: refused before Bedrock is asked, at no cost
	_, err = oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "amazon.titan-embed-text-v2:0",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	if e := apiError(t, err, 400, ""); !strings.Contains(e.Message, "one text per request") {
		t.Errorf("titan with two inputs: %q", e.Message)
	}
	// the refused one's row too, so that it is checked, not only if in time
	rows := s.gw.WaitUsage("emb", 3)
	// Titan: 35 tokens at 0.02/M = 0.7 -> 1 unit, its own count
	if r := rows[0]; r.Channel != "br-embed" || r.PromptTokens != fakePrompt || r.Estimated || r.Cost != 1 {
		t.Errorf("titan row %+v", r)
	}
	if r := rows[1]; r.Channel != "br-embed" || r.PromptTokens == 0 || !r.Estimated || r.Cost != 1 {
		t.Errorf("cohere row %+v", r)
	}
	for _, r := range rows[2:] {
		if r.Cost != 0 {
			t.Errorf("a refused request was charged: %+v", r)
		}
	}
}
