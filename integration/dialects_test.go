package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// upstreamFamily is one row of the dialect matrix: an upstream family, its
// fake, the one model its channel serves and that model's price. A new
// family is one row here (and its fake in internal/gatewaytest).
type upstreamFamily struct {
	typ, channel, model, key string
	start                    func(t testing.TB, key string) gatewaytest.Fake
	// price is the terms of the model's Caddyfile price; cost what one
	// turn of the matrix costs in units at that price
	price []string
	cost  int64
	// check looks at the second upstream request of a conversation for
	// what the family needs carried back
	check func(t *testing.T, client string, second gatewaytest.Recorded)
}

// families: the matrix's upstreams. Each turn costs 35 prompt tokens, 5 of
// them cached, and 12 out: claude 30*3 + 5*0.30 + 12*15 = 271.5, gemini
// 30*0.30 + 5*0.075 + 12*2.50 = 39.375, gpt and azure (the same prices)
// 30*0.15 + 5*0.075 + 12*0.60 = 12.075 units, each rounded up.
var families = []upstreamFamily{
	{
		typ: "anthropic", channel: "claude", model: "claude-test", key: "sk-ant-up",
		start: func(t testing.TB, key string) gatewaytest.Fake { return gatewaytest.NewFakeAnthropic(t, key) },
		price: []string{"input 3", "output 15", "cached_input 0.30"}, cost: 272,
		check: func(t *testing.T, _ string, second gatewaytest.Recorded) {
			if second.Header.Get("anthropic-version") == "" {
				t.Error("no anthropic-version upstream")
			}
		},
	},
	{
		typ: "gemini", channel: "gem", model: "gemini-test", key: "AIza-up",
		start: func(t testing.TB, key string) gatewaytest.Fake { return gatewaytest.NewFakeGemini(t, key) },
		price: []string{"input 0.30", "output 2.50", "cached_input 0.075"}, cost: 40,
		check: func(t *testing.T, client string, second gatewaytest.Recorded) {
			// Anthropic clients carry Gemini's signature in a thinking
			// block; Gemini clients send it as they got it; OpenAI's
			// have nowhere to keep it
			if client != "openai" && (len(second.Signatures) != 1 || second.Signatures[0] != gatewaytest.FakeSignature) {
				t.Errorf("Gemini's thought signature came back as %q", second.Signatures)
			}
		},
	},
	{
		typ: "azure", channel: "az", model: "azure-test", key: "az-up",
		start: func(t testing.TB, key string) gatewaytest.Fake { return gatewaytest.NewFakeAzure(t, key) },
		price: []string{"input 0.15", "output 0.60", "cached_input 0.075"}, cost: 13,
		check: func(t *testing.T, _ string, second gatewaytest.Recorded) {
			if second.Path != "/openai/deployments/azure-test/chat/completions" || second.Header.Get("Authorization") != "" {
				t.Errorf("the Azure upstream got %s with Authorization %q", second.Path, second.Header.Get("Authorization"))
			}
		},
	},
	{
		typ: "bedrock", channel: "br", model: "amazon.nova-lite-v1:0", key: "ABSK-br-up",
		start: func(t testing.TB, key string) gatewaytest.Fake {
			return gatewaytest.NewFakeBedrock(t, "us-east-1", aws.Credentials{}, key)
		},
		// 30*0.06 + 5*0.015 + 12*0.24 = 4.755
		price: []string{"input 0.06", "output 0.24", "cached_input 0.015"}, cost: 5,
		check: func(t *testing.T, _ string, second gatewaytest.Recorded) {
			if second.Path != "/model/amazon.nova-lite-v1:0/converse" && second.Path != "/model/amazon.nova-lite-v1:0/converse-stream" {
				t.Errorf("the Bedrock upstream got %s", second.Path)
			}
		},
	},
	{
		typ: "openai", channel: "gpt", model: "gpt-test", key: "sk-oai-up",
		start: func(t testing.TB, key string) gatewaytest.Fake { return gatewaytest.NewFakeOpenAI(t, key) },
		price: []string{"input 0.15", "output 0.60", "cached_input 0.075"}, cost: 13,
		check: func(*testing.T, string, gatewaytest.Recorded) {},
	},
}

// dialectsConfig has one channel of each family, each serving one model.
func dialectsConfig() *caddyfile {
	c := gatewayConfig()
	for _, f := range families {
		c.channel(f.channel, f.typ, "{{"+strings.ToUpper(f.channel)+"}}", f.key, f.model)
	}
	for _, f := range families {
		c.price(f.model, f.price...)
	}
	return c
}

// the counts every fake reports in the matrix: 30 fresh + 5 cached prompt
// tokens, 12 out
const (
	fakePrompt     = 35
	fakeCached     = 5
	fakeCompletion = 12
)

type dialectsSetup struct {
	gw    *gatewaytest.Gateway
	fakes map[string]gatewaytest.Fake // model -> its upstream
}

func startDialects(t *testing.T) *dialectsSetup {
	t.Helper()
	s := &dialectsSetup{fakes: map[string]gatewaytest.Fake{}}
	vars := gatewaytest.Vars{}
	for _, f := range families {
		fake := f.start(t, f.key)
		fake.Set(func(b *gatewaytest.Behavior) {
			b.Reply, b.PromptTokens, b.CachedTokens, b.CompletionTokens = "Hello there", fakePrompt, fakeCached, fakeCompletion
		})
		s.fakes[f.model] = fake
		vars[strings.ToUpper(f.channel)] = fake.BaseURL()
	}
	s.gw = gatewaytest.Start(t, dialectsConfig().String(), vars)
	return s
}

// a 1x1 PNG
var testPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

const (
	systemPrompt = "You are a weather bot."
	userPrompt   = "What is the weather in Paris and Rome? Here is a map."
)

// weatherFor is what the client's tool returns.
func weatherFor(args string) string {
	if strings.Contains(args, "Rome") {
		return "21C"
	}
	return "18C"
}

// conversation is what a client saw over the two turns.
type conversation struct {
	calls []gatewaytest.Call // turn 1: the tool calls the SDK parsed
	text1 string             // turn 1: text beside the calls
	text2 string             // turn 2: the answer after the tool results
}

// The Anthropic SDK: a user turn with an image and a tool, then the
// assistant's message sent back as the SDK gives it (ToParam) with the tool
// results.
func anthropicConversation(t *testing.T, gw *gatewaytest.Gateway, key, model, system string, stream bool) conversation {
	client := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 512,
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock(userPrompt),
			anthropic.NewImageBlockBase64("image/png", base64.StdEncoding.EncodeToString(testPNG)),
		)},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			Description: anthropic.String("The weather in a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		}}},
	}
	send := func() anthropic.Message {
		t.Helper()
		if !stream {
			msg, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			return *msg
		}
		s := client.Messages.NewStreaming(ctx, params)
		var msg anthropic.Message
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	var c conversation
	msg := send()
	if msg.Usage.OutputTokens != fakeCompletion {
		t.Errorf("turn 1 usage %+v", msg.Usage)
	}
	var results []anthropic.ContentBlockParamUnion
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			c.text1 += b.Text
		case "tool_use":
			c.calls = append(c.calls, gatewaytest.Call{Name: b.Name, Args: string(b.Input)})
			results = append(results, anthropic.NewToolResultBlock(b.ID, weatherFor(string(b.Input)), false))
		}
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("turn 1 stop reason %q", msg.StopReason)
	}
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	msg = send()
	for _, b := range msg.Content {
		c.text2 += b.Text
	}
	if msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("turn 2 stop reason %q", msg.StopReason)
	}
	return c
}

// Google's Gen AI SDK: the model's content sent back as received, with
// function responses.
func geminiConversation(t *testing.T, gw *gatewaytest.Gateway, key, model, version, system string, stream bool) conversation {
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL, APIVersion: version}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: &genai.Content{Parts: []*genai.Part{{Text: system}}},
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name:        "get_weather",
			Description: "The weather in a city",
			Parameters:  &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}, Required: []string{"city"}},
		}}}},
	}
	contents := []*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{{Text: userPrompt}, {InlineData: &genai.Blob{MIMEType: "image/png", Data: testPNG}}}}}
	send := func() (*genai.Content, string, *genai.GenerateContentResponseUsageMetadata) {
		t.Helper()
		if !stream {
			resp, err := client.Models.GenerateContent(ctx, model, contents, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Candidates[0].Content, string(resp.Candidates[0].FinishReason), resp.UsageMetadata
		}
		// gather the chunks' parts into one content, as the SDK's chats do
		merged := &genai.Content{Role: genai.RoleModel}
		var finish string
		var usage *genai.GenerateContentResponseUsageMetadata
		for resp, err := range client.Models.GenerateContentStream(ctx, model, contents, cfg) {
			if err != nil {
				t.Fatal(err)
			}
			if resp.UsageMetadata != nil {
				usage = resp.UsageMetadata
			}
			if len(resp.Candidates) == 0 {
				continue
			}
			cand := resp.Candidates[0]
			if cand.Content != nil {
				merged.Parts = append(merged.Parts, cand.Content.Parts...)
			}
			if cand.FinishReason != "" {
				finish = string(cand.FinishReason)
			}
		}
		return merged, finish, usage
	}
	var c conversation
	content, finish, usage := send()
	if finish != "STOP" || usage == nil || usage.CandidatesTokenCount != fakeCompletion {
		t.Errorf("turn 1 finish %q usage %+v", finish, usage)
	}
	var responses []*genai.Part
	for _, p := range content.Parts {
		switch {
		case p.FunctionCall != nil:
			args, _ := json.Marshal(p.FunctionCall.Args)
			c.calls = append(c.calls, gatewaytest.Call{Name: p.FunctionCall.Name, Args: string(args)})
			responses = append(responses, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Response: map[string]any{"output": weatherFor(string(args))}}})
		case !p.Thought:
			c.text1 += p.Text
		}
	}
	contents = append(contents, content, &genai.Content{Role: genai.RoleUser, Parts: responses})
	content, _, _ = send()
	for _, p := range content.Parts {
		if !p.Thought {
			c.text2 += p.Text
		}
	}
	return c
}

// The OpenAI SDK: the assistant message sent back as received (ToParam,
// with refusal and annotations), then one tool message per call.
func openaiConversation(t *testing.T, gw *gatewaytest.Gateway, key, model, system string, stream bool) conversation {
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(system),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart(userPrompt),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG)}),
			}),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        "get_weather",
			Description: openai.String("The weather in a city"),
			Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		})},
	}
	if stream {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	send := func() (openai.ChatCompletionMessage, string, openai.CompletionUsage) {
		t.Helper()
		if !stream {
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Choices[0].Message, resp.Choices[0].FinishReason, resp.Usage
		}
		s := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) == 0 {
			t.Fatal("the stream had no choices")
		}
		return acc.Choices[0].Message, acc.Choices[0].FinishReason, acc.Usage
	}
	var c conversation
	msg, finish, usage := send()
	if finish != "tool_calls" || usage.CompletionTokens != fakeCompletion || usage.PromptTokens != fakePrompt {
		t.Errorf("turn 1 finish %q usage %+v", finish, usage)
	}
	c.text1 = msg.Content
	params.Messages = append(params.Messages, msg.ToParam())
	for _, tc := range msg.ToolCalls {
		c.calls = append(c.calls, gatewaytest.Call{Name: tc.Function.Name, Args: tc.Function.Arguments})
		params.Messages = append(params.Messages, openai.ToolMessage(weatherFor(tc.Function.Arguments), tc.ID))
	}
	msg, finish, _ = send()
	if finish != "stop" {
		t.Errorf("turn 2 finish %q", finish)
	}
	c.text2 = msg.Content
	return c
}

// Every client dialect reaches every upstream family, with tools, parallel
// calls, an image and streaming, and each request is billed on the
// upstream's own counts.
func TestDialectsMatrix(t *testing.T) {
	s := startDialects(t)
	type client struct {
		name string
		run  func(t *testing.T, key, model, system string, stream bool) conversation
	}
	clients := []client{
		{"anthropic", func(t *testing.T, key, model, system string, stream bool) conversation {
			return anthropicConversation(t, s.gw, key, model, system, stream)
		}},
		{"gemini", func(t *testing.T, key, model, system string, stream bool) conversation {
			return geminiConversation(t, s.gw, key, model, "", system, stream)
		}},
		{"gemini-v1", func(t *testing.T, key, model, system string, stream bool) conversation {
			return geminiConversation(t, s.gw, key, model, "v1", system, stream)
		}},
		{"openai", func(t *testing.T, key, model, system string, stream bool) conversation {
			return openaiConversation(t, s.gw, key, model, system, stream)
		}},
	}
	for _, c := range clients {
		for _, fam := range families {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s to %s", c.name, fam.model)
				if stream {
					name += " streaming"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					user := strings.NewReplacer(" ", "-").Replace(name)
					key := s.gw.AddUser(user, 10_000_000)
					// the subtests run at once: each tags its system prompt
					system := systemPrompt + " [" + user + "]"
					conv := c.run(t, key, fam.model, system, stream)

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
					for _, r := range s.fakes[fam.model].Requests() {
						if r.System == system {
							reqs = append(reqs, r)
						}
					}
					if len(reqs) != 2 {
						t.Fatalf("the upstream got %d requests, want 2", len(reqs))
					}
					first, second := reqs[0], reqs[1]
					if first.Prompt != userPrompt || !bytes.Equal(first.Image, testPNG) {
						t.Errorf("the upstream saw prompt %q image %d bytes", first.Prompt, len(first.Image))
					}
					if len(first.Tools) != 1 || first.Tools[0] != "get_weather" || first.Stream != stream || second.Stream != stream {
						t.Errorf("the upstream saw tools %v stream %v/%v", first.Tools, first.Stream, second.Stream)
					}
					if strings.Join(second.Results, ",") != "18C,21C" {
						t.Errorf("the upstream saw tool results %q", second.Results)
					}
					fam.check(t, c.name, second)

					rows := s.gw.WaitUsage(user, 2)
					for _, r := range rows {
						if r.PromptTokens != fakePrompt || r.CompletionTokens != fakeCompletion || r.Cost != fam.cost ||
							r.Estimated || r.Status != 200 || r.Channel != fam.channel || r.Stream != stream {
							t.Errorf("usage row %+v", r)
						}
					}
				})
			}
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// Side endpoints: token counts (asked of a same-family upstream, or counted
// locally), the model lists in each shape, and errors in the caller's
// dialect.
func TestDialectSideEndpoints(t *testing.T) {
	s := startDialects(t)
	key := s.gw.AddUser("side", 10_000_000)
	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.gw.URL}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("count tokens", func(t *testing.T) {
		count := func(model string) int64 {
			n, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(model),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))}})
			if err != nil {
				t.Fatal(err)
			}
			return n.InputTokens
		}
		if n := count("claude-test"); n != gatewaytest.CountTokens {
			t.Errorf("anthropic count from the Anthropic upstream = %d", n)
		}
		if n := count("gpt-test"); n <= 0 || n == gatewaytest.CountTokens {
			t.Errorf("anthropic count for an OpenAI model = %d, want a local count", n)
		}
		gcount := func(model string) int32 {
			r, err := gc.Models.CountTokens(ctx, model, genai.Text("How many tokens is this?"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return r.TotalTokens
		}
		if n := gcount("gemini-test"); n != gatewaytest.CountTokens {
			t.Errorf("gemini count from the Gemini upstream = %d", n)
		}
		if n := gcount("claude-test"); n <= 0 || n == gatewaytest.CountTokens {
			t.Errorf("gemini count for a Claude model = %d, want a local count", n)
		}
		// counting is free, whether the vendor or the gateway counted
		for _, r := range s.gw.WaitUsage("side", 4) {
			if r.Cost != 0 {
				t.Errorf("a token count was charged: %+v", r)
			}
		}
	})
	t.Run("openai model get", func(t *testing.T) {
		resp, body := s.gw.Do(http.MethodGet, "/v1/models/gpt-test", key, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"gpt-test"`) {
			t.Errorf("GET /v1/models/gpt-test: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		var models []string
		for _, f := range families {
			models = append(models, f.model)
		}
		slices.Sort(models)
		if strings.Join(ids, ",") != strings.Join(models, ",") {
			t.Errorf("anthropic model list %v", ids)
		}
		m, err := ac.Models.Get(ctx, "claude-test", anthropic.ModelGetParams{})
		if err != nil || m.ID != "claude-test" || m.Type != "model" {
			t.Errorf("anthropic model %+v %v", m, err)
		}
		gm, err := gc.Models.Get(ctx, "gemini-test", nil)
		if err != nil || gm.Name != "models/gemini-test" {
			t.Errorf("gemini model %+v %v", gm, err)
		}
		resp, body := s.gw.Do(http.MethodGet, "/v1beta/models", "", nil, http.Header{"X-Goog-Api-Key": {key}})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"models/gpt-test"`) {
			t.Errorf("gemini model list %d %s", resp.StatusCode, body)
		}
		// without anthropic-version the list is OpenAI's
		resp, body = s.gw.Do(http.MethodGet, "/v1/models", key, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"list"`) {
			t.Errorf("openai model list %d %s", resp.StatusCode, body)
		}
	})

	t.Run("errors", func(t *testing.T) {
		// a missing anthropic-version is a 400 that says so
		resp, body := s.gw.Do(http.MethodPost, "/v1/messages", "", []byte(`{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), http.Header{"X-Api-Key": {key}})
		var ae struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if resp.StatusCode != 400 || json.Unmarshal(body, &ae) != nil || ae.Type != "error" || !strings.Contains(ae.Error.Message, "anthropic-version") {
			t.Errorf("no version: %d %s", resp.StatusCode, body)
		}
		// a refusal, in the Anthropic SDK's error type
		_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemini-test", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: "a document"}))}})
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != 400 || !strings.Contains(aerr.Error(), "document") {
			t.Errorf("document to Gemini: %v", err)
		}
		// an upstream error translated into Gemini's shape
		s.fakes["claude-test"].Close()
		_, err = gc.Models.GenerateContent(ctx, "claude-test", genai.Text("hi"), nil)
		var gerr genai.APIError
		if !errors.As(err, &gerr) || gerr.Code < 500 || gerr.Status == "" {
			t.Errorf("upstream down, gemini client: %#v", err)
		}
	})
}
