package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The OpenAI-compatible vendors' presets (adapters/openaicompat), reached
// through the OpenAI, Anthropic and Gemini SDKs against fakes that speak
// each vendor's wire (gatewaytest.FakeCompat): DeepSeek's reasoning as
// Anthropic thinking and Gemini thought parts, its cache reads billed at
// the cache price, Zhipu's path without /v1 and its business codes,
// Moonshot's stream usage inside the last choice.

// compatAnswer: 1000 prompt tokens, 800 of them read from cache, 300 out.
// At input 0.56, cached_input 0.07, output 1.68 (USD per million):
// 200*0.56 + 800*0.07 + 300*1.68 = 112 + 56 + 504 = 672 units, exactly.
var compatAnswer = gatewaytest.CompatAnswer{
	Reasoning: "Compare the tenths: 1 is less than 8.", Reply: "9.11 is smaller than 9.8.",
	Prompt: 1000, Cached: 800, Completion: 300, ReasoningTok: 200,
}

const compatCost = 672

func compatConfig(typ, model string) *caddyfile {
	return gatewayConfig().
		channel("vendor", typ, "{{UP}}", "sk-vendor-up", model).
		price(model, "input 0.56", "output 1.68", "cached_input 0.07")
}

func startCompat(t *testing.T, vendor, model string) (*gatewaytest.Gateway, *gatewaytest.FakeCompat, string) {
	t.Helper()
	fake := gatewaytest.NewFakeCompat(t, vendor, "sk-vendor-up")
	fake.Answer(compatAnswer)
	gw := gatewaytest.Start(t, compatConfig(vendor, model).String(), gatewaytest.Vars{"UP": fake.BaseURL()})
	return gw, fake, gw.AddUser("compat", 10_000_000)
}

func anthropicClient(gw *gatewaytest.Gateway, key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

func genaiClient(t *testing.T, gw *gatewaytest.Gateway, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func anthropicAsk(t *testing.T, c anthropic.Client, model string, stream bool) anthropic.Message {
	t.Helper()
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 512,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Which is smaller, 9.11 or 9.8?"))}}
	if !stream {
		msg, err := c.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		return *msg
	}
	s := c.Messages.NewStreaming(context.Background(), params)
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

func genaiAsk(t *testing.T, c *genai.Client, model string, stream bool) (thought, text string) {
	t.Helper()
	ctx := context.Background()
	collect := func(r *genai.GenerateContentResponse) {
		for _, cand := range r.Candidates {
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				if p.Thought {
					thought += p.Text
				} else {
					text += p.Text
				}
			}
		}
	}
	if !stream {
		r, err := c.Models.GenerateContent(ctx, model, genai.Text("Which is smaller, 9.11 or 9.8?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		collect(r)
		return
	}
	for r, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("Which is smaller, 9.11 or 9.8?"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		collect(r)
	}
	return
}

// DeepSeek's reasoning_content reaches an Anthropic client as a thinking
// block and a Gemini client as a thought part, streamed or not; every
// request is billed 672 units, its 800 cached tokens at the cache price;
// the request went to DeepSeek's path with max_tokens.
func TestCompatDeepSeekReasoning(t *testing.T) {
	gw, fake, key := startCompat(t, "deepseek", "deepseek-reasoner")
	ac, gc := anthropicClient(gw, key), genaiClient(t, gw, key)
	n := 0
	for _, stream := range []bool{false, true} {
		msg := anthropicAsk(t, ac, "deepseek-reasoner", stream)
		n++
		if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != compatAnswer.Reasoning ||
			msg.Content[1].Type != "text" || msg.Content[1].Text != compatAnswer.Reply {
			t.Errorf("anthropic stream=%v: content %+v", stream, msg.Content)
		}
		if msg.Usage.CacheReadInputTokens != 800 || msg.Usage.InputTokens != 200 || msg.Usage.OutputTokens != 300 {
			t.Errorf("anthropic stream=%v: usage %+v", stream, msg.Usage)
		}
		thought, text := genaiAsk(t, gc, "deepseek-reasoner", stream)
		n++
		if thought != compatAnswer.Reasoning || text != compatAnswer.Reply {
			t.Errorf("gemini stream=%v: thought %q text %q", stream, thought, text)
		}
	}
	// an OpenAI client gets DeepSeek's answer as it is
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	resp, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "deepseek-reasoner",
		MaxCompletionTokens: openai.Int(256), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Which is smaller?")}})
	if err != nil {
		t.Fatal(err)
	}
	n++
	if rc := resp.Choices[0].Message.JSON.ExtraFields["reasoning_content"]; !strings.Contains(rc.Raw(), "Compare the tenths") || resp.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("openai: reasoning_content %s, usage %+v", rc.Raw(), resp.Usage)
	}

	for _, r := range fake.Requests() {
		if r.Path != "/chat/completions" || r.Body["max_tokens"] == nil || r.Body["max_completion_tokens"] != nil {
			t.Errorf("DeepSeek got %s with max_tokens %v, max_completion_tokens %v", r.Path, r.Body["max_tokens"], r.Body["max_completion_tokens"])
		}
	}
	for _, r := range gw.WaitUsage("compat", n) {
		if r.PromptTokens != 1000 || r.CompletionTokens != 300 || r.Cost != compatCost || r.Estimated || r.Status != 200 {
			t.Errorf("usage row %+v, want 1000 in (800 cached), 300 out, %d units", r, compatCost)
		}
	}
}

// An Anthropic client's thinking comes back to DeepSeek as the assistant
// turn's reasoning_content, which its thinking mode needs beside the
// turn's tool calls.
func TestCompatDeepSeekThinkingHistory(t *testing.T) {
	gw, fake, key := startCompat(t, "deepseek", "deepseek-reasoner")
	ac := anthropicClient(gw, key)
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "deepseek-reasoner", MaxTokens: 512,
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?")),
			anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig", "Call get_weather for Paris."), anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Paris"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "18C", false)),
		}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	msgs, _ := reqs[len(reqs)-1].Body["messages"].([]any)
	var found bool
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		if m["role"] == "assistant" && m["reasoning_content"] == "Call get_weather for Paris." && m["tool_calls"] != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("the assistant turn went without its reasoning_content: %v", msgs)
	}
}

// Zhipu: the channel's base_url is the host, and the preset sends to
// /api/paas/v4 (no /v1); its cache reads are billed at the cache price;
// its business code 1113 (the account in arrears, on a 429) is the
// channel's fault in every dialect, never "retry shortly"; 1301 (unsafe
// content, a 400) is the caller's, with Zhipu's words.
func TestCompatZhipu(t *testing.T) {
	gw, fake, key := startCompat(t, "zhipu", "glm-4.6")
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	ask := openai.ChatCompletionNewParams{Model: "glm-4.6", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("你好")}}
	s := oc.Chat.Completions.NewStreaming(ctx, ask)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != compatAnswer.Reply {
		t.Errorf("content %q", acc.Choices[0].Message.Content)
	}
	thought, _ := genaiAsk(t, genaiClient(t, gw, key), "glm-4.6", false)
	if thought != compatAnswer.Reasoning {
		t.Errorf("gemini thought %q", thought)
	}
	for _, r := range fake.Requests() {
		if r.Path != "/api/paas/v4/chat/completions" {
			t.Errorf("Zhipu got %s", r.Path)
		}
	}
	for _, r := range gw.WaitUsage("compat", 2) {
		if r.Cost != compatCost || r.Estimated {
			t.Errorf("usage row %+v, want %d units", r, compatCost)
		}
	}

	fake.Fail(http.StatusTooManyRequests, `{"error":{"code":"1113","message":"您的账户已欠费，请充值后重试。"}}`)
	_, err := oc.Chat.Completions.New(ctx, ask)
	if e := apiError(t, err, http.StatusBadGateway, ""); !strings.Contains(e.Message, "account") {
		t.Errorf("openai: %s", e.Message)
	}
	zc := anthropicClient(gw, key)
	_, err = zc.Messages.New(ctx, anthropic.MessageNewParams{Model: "glm-4.6", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway {
		t.Errorf("anthropic: %v", err)
	}
	_, err = genaiClient(t, gw, key).Models.GenerateContent(ctx, "glm-4.6", genai.Text("hi"), nil)
	var ge genai.APIError
	if !errors.As(err, &ge) || ge.Code != http.StatusBadGateway {
		t.Errorf("gemini: %#v", err)
	}

	fake.Fail(http.StatusBadRequest, `{"error":{"code":"1301","message":"系统检测到输入或生成内容可能包含不安全或敏感内容"}}`)
	_, err = oc.Chat.Completions.New(ctx, ask)
	if e := apiError(t, err, http.StatusBadRequest, "1301"); !strings.Contains(e.Message, "不安全") {
		t.Errorf("openai: %s", e.Message)
	}
}

// Moonshot reports a stream's usage inside its last chunk's choice, and
// its cache reads at the top of usage: both clients are billed exactly,
// not estimated.
func TestCompatMoonshotStreamUsage(t *testing.T) {
	gw, _, key := startCompat(t, "moonshot", "kimi-k2-thinking")
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "kimi-k2-thinking",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	msg := anthropicAsk(t, anthropicClient(gw, key), "kimi-k2-thinking", true)
	if msg.Usage.CacheReadInputTokens != 800 || msg.Content[0].Type != "thinking" {
		t.Errorf("anthropic: usage %+v content %+v", msg.Usage, msg.Content)
	}
	for _, r := range gw.WaitUsage("compat", 2) {
		if r.PromptTokens != 1000 || r.CompletionTokens != 300 || r.Cost != compatCost || r.Estimated {
			t.Errorf("usage row %+v, want %d units", r, compatCost)
		}
	}
}

// A vendor needs no preset for what the openai family reads itself: a
// channel of type openai pointed at DeepSeek's /v1 bills its
// prompt_cache_hit_tokens at the cache price and shows its reasoning.
func TestCompatDeepSeekAsTypeOpenAI(t *testing.T) {
	fake := gatewaytest.NewFakeCompat(t, "deepseek", "sk-vendor-up")
	fake.Answer(compatAnswer)
	gw := gatewaytest.Start(t, compatConfig("openai", "deepseek-chat").String(), gatewaytest.Vars{"UP": fake.BaseURL()})
	key := gw.AddUser("compat", 10_000_000)
	msg := anthropicAsk(t, anthropicClient(gw, key), "deepseek-chat", true)
	if msg.Usage.CacheReadInputTokens != 800 || len(msg.Content) == 0 || msg.Content[0].Type != "thinking" {
		t.Errorf("anthropic: usage %+v content %+v", msg.Usage, msg.Content)
	}
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	if _, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "deepseek-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range gw.WaitUsage("compat", 2) {
		if r.Cost != compatCost || r.Estimated {
			t.Errorf("usage row %+v, want %d units", r, compatCost)
		}
	}
}

// A preset's channel may leave base_url out: the gateway starts and the
// channel calls the vendor's own address (here LM Studio's, on this
// machine, where nothing listens: the caller gets the gateway's 5xx, not a
// configuration error at start).
func TestCompatPresetDefaultBaseURL(t *testing.T) {
	cfg := gatewayConfig().channel("local", "lmstudio", "", "lm-studio", "qwen2.5-7b-instruct").free("qwen2.5-7b-instruct")
	gw := gatewaytest.Start(t, cfg.String(), nil)
	key := gw.AddUser("compat", 10_000_000)
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "qwen2.5-7b-instruct",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if e := sdkError(t, err); e.StatusCode < 500 {
		t.Errorf("got %d %s, want the gateway's 5xx for an unreachable upstream", e.StatusCode, e.Message)
	}
}

// OpenRouter: its reasoning (the word reasoning, not reasoning_content)
// reaches an Anthropic client as thinking, its cache reads are billed at
// the cache price; a failure after the stream began (a chunk with an error
// and finish_reason "error", then the connection ends) reaches OpenAI and
// Anthropic clients as the gateway's upstream error event, never as a
// finished answer, and OpenRouter's words reach the log.
func TestCompatOpenRouter(t *testing.T) {
	gw, fake, key := startCompat(t, "openrouter", "anthropic/claude-sonnet-4")
	ac := anthropicClient(gw, key)
	msg := anthropicAsk(t, ac, "anthropic/claude-sonnet-4", true)
	if len(msg.Content) != 2 || msg.Content[0].Thinking != compatAnswer.Reasoning || msg.Usage.CacheReadInputTokens != 800 {
		t.Errorf("anthropic: content %+v usage %+v", msg.Content, msg.Usage)
	}
	if r := gw.WaitUsage("compat", 1)[0]; r.Cost != compatCost || r.Estimated {
		t.Errorf("usage row %+v, want %d units", r, compatCost)
	}

	fake.FailMidStream()
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	s := oc.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "anthropic/claude-sonnet-4",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for s.Next() {
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("openai stream ended with %v, want the gateway's 502 error event", err)
	}
	// the line is written as the attempt ends, which may be just after the
	// client read the error event
	eventually(t, "the log says what OpenRouter said", func() bool {
		return strings.Contains(gw.Logs(), "Provider disconnected unexpectedly")
	})
	as := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "anthropic/claude-sonnet-4", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	for as.Next() {
	}
	if err := as.Err(); err == nil {
		t.Error("the anthropic stream ended without an error")
	}
}
