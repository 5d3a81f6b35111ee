package integration

// Prices as vendors charge them (issue 33): a tier by prompt length,
// reserved at the tier a request could reach and settled at the one it
// reached, recorded on its usage row; cache writes priced by their
// lifetime; a plan's multiplier per model; prices read from a catalogue
// file, and the CLI that prints one as Caddyfile lines.

import (
	"context"
	"os"
	"path/filepath"
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

// catalogueFile is the public catalogue's shape, saved in the repository.
func catalogueFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "billing", "testdata", "litellm_catalogue.json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pricesConfig() *caddyfile {
	return gatewayConfig().
		option("prices_file {{CATALOGUE}} gpt-4o-mini").
		option("models_group opus claude-opus-*").
		option(block("plan pro", "daily 1", "multiplier group:opus 2", "multiplier claude-sonnet-4-5 0.5")).
		channel("oa", "openai", "{{OA}}", "sk-oa", "gemini-2.5-pro gpt-4o-mini").
		channel("an", "anthropic", "{{AN}}", "sk-an", "claude-sonnet-4-5 claude-opus-4-1").
		channel("br", block("bedrock", "region "+bedrockRegion), "{{BR}}", bedrockAPIKey, bedrockClaude,
			"model_map claude-on-bedrock "+bedrockClaude).
		price("claude-on-bedrock", "input 3", "output 15", "cached_input 0.30", "cache_write 3.75", "cache_write_1h 6").
		channel("ge", "gemini", "{{GE}}", "sk-ge", "gemini-2.5-pro-latest").
		// Gemini 2.5 Pro's prices: more above 200k prompt tokens
		price("gemini-2.5-pro", "input 1.25", "output 10", "cached_input 0.125",
			block("above 200000", "input 2.50", "output 15", "cached_input 0.25")).
		price("gemini-2.5-pro-latest", "input 1.25", "output 10", "cached_input 0.125",
			block("above 200000", "input 2.50", "output 15", "cached_input 0.25")).
		// Claude Sonnet's: a 5-minute cache write at 1.25x, a 1-hour one at 2x
		price("claude-sonnet-4-5", "input 3", "output 15", "cached_input 0.30", "cache_write 3.75", "cache_write_1h 6").
		price("claude-opus-4-1", "input 15", "output 75")
}

func TestPricesAsVendorsCharge(t *testing.T) {
	oa := gatewaytest.NewFakeOpenAI(t, "sk-oa")
	an := gatewaytest.NewFakeAnthropic(t, "sk-an")
	br := gatewaytest.NewFakeBedrock(t, bedrockRegion, aws.Credentials{}, bedrockAPIKey)
	ge := gatewaytest.NewFakeGemini(t, "sk-ge")
	vars := gatewaytest.Vars{"OA": oa.URL, "AN": an.URL, "BR": br.URL, "GE": ge.URL, "CATALOGUE": catalogueFile(t)}
	gw := gatewaytest.Start(t, pricesConfig().String(), vars)
	ctx := context.Background()
	chat := func(key, model, prompt string, maxTokens int64) (*openai.ChatCompletion, error) {
		c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		return c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(maxTokens),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
	}

	t.Run("a 250k-token prompt is billed at its tier", func(t *testing.T) {
		key := gw.AddUser("long", 10_000_000)
		oa.Set(func(b *gatewaytest.Behavior) {
			b.PromptTokens, b.CompletionTokens, b.CachedTokens = 250_000, 1000, 50_000
		})
		resp, err := chat(key, "gemini-2.5-pro", "read this long document", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.PromptTokens != 250_000 {
			t.Fatalf("usage %+v", resp.Usage)
		}
		// the whole request at the tier: 200,000 at 2.50, 50,000 cached at
		// 0.25, 1000 out at 15
		wantTier := int64(500_000 + 12_500 + 15_000)
		// a prompt of exactly 200k is not above it: the base prices
		oa.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens, b.CachedTokens = 200_000, 1000, 0 })
		if _, err := chat(key, "gemini-2.5-pro", "a shorter one", 1000); err != nil {
			t.Fatal(err)
		}
		wantBase := int64(250_000 + 10_000)
		// the same through Google's own SDK, on Gemini's own API
		ge.Set(func(b *gatewaytest.Behavior) {
			b.PromptTokens, b.CompletionTokens, b.CachedTokens = 250_000, 1000, 50_000
		})
		gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL}})
		if err != nil {
			t.Fatal(err)
		}
		gr, err := gc.Models.GenerateContent(ctx, "gemini-2.5-pro-latest", genai.Text("read this long document"), &genai.GenerateContentConfig{MaxOutputTokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if gr.UsageMetadata == nil || gr.UsageMetadata.PromptTokenCount != 250_000 {
			t.Fatalf("gemini usage %+v", gr.UsageMetadata)
		}
		rows := gw.WaitUsage("long", 3)
		if rows[2].Cost != wantTier || rows[2].PriceTier != 200_000 {
			t.Fatalf("gemini row: cost %d tier %d, want %d at 200000", rows[2].Cost, rows[2].PriceTier, wantTier)
		}
		if rows[0].Cost != wantTier || rows[0].PriceTier != 200_000 || rows[1].Cost != wantBase || rows[1].PriceTier != 0 {
			t.Fatalf("rows: cost %d tier %d, cost %d tier %d; want %d at 200000, %d at 0",
				rows[0].Cost, rows[0].PriceTier, rows[1].Cost, rows[1].PriceTier, wantTier, wantBase)
		}
		// the export says so too
		csv := gw.CLI("usage", "export", "--format", "csv")
		if !strings.HasSuffix(strings.SplitN(csv, "\n", 2)[0], ",plan,price_tier") || strings.Count(csv, ",,,,200000\n") != 2 {
			t.Errorf("export:\n%s", csv)
		}
		if q, _ := gw.Quota("long"); q != 10_000_000-2*wantTier-wantBase {
			t.Fatalf("balance %d, want %d", q, 10_000_000-2*wantTier-wantBase)
		}
	})

	t.Run("the reservation takes the tier the prompt could reach", func(t *testing.T) {
		// 400 kB of text: estimated at 100k tokens (four bytes a token),
		// but it could be up to 400k (a byte a token), past 200k. At the
		// base prices it would reserve 100k x 1.25 + 1000 x 10 = 135,000
		// units; at the tier's 100k x 2.50 + 1000 x 15 = 265,000.
		prompt := strings.Repeat("word ", 80_000)
		key := gw.AddUser("reach", 200_000)
		_, err := chat(key, "gemini-2.5-pro", prompt, 1000)
		e := apiError(t, err, 429, "insufficient_quota")
		if !strings.Contains(e.Message, "0.26") {
			t.Errorf("the refusal names no tier reservation: %s", e.Message)
		}
		// with enough to cover it, served and settled at the real usage
		oa.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens, b.CachedTokens = 90_000, 10, 0 })
		key = gw.AddUser("reach2", 300_000)
		if _, err := chat(key, "gemini-2.5-pro", prompt, 1000); err != nil {
			t.Fatal(err)
		}
		if rows := gw.WaitUsage("reach2", 1); rows[0].Cost != 112_500+100 || rows[0].PriceTier != 0 {
			t.Fatalf("row %+v", rows[0])
		}
	})

	t.Run("a 1-hour cache write is priced as such", func(t *testing.T) {
		key := gw.AddUser("cacher", 10_000_000)
		an.Set(func(b *gatewaytest.Behavior) {
			b.PromptTokens, b.CompletionTokens, b.CachedTokens = 10_000, 100, 1000
			b.CacheWriteTokens, b.CacheWrite1hTokens = 6000, 4000
		})
		c := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
			System: []anthropic.TextBlockParam{{Text: "a long system prompt kept for an hour",
				CacheControl: anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
		msg, err := c.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Usage.CacheCreation.Ephemeral1hInputTokens != 4000 || msg.Usage.CacheCreation.Ephemeral5mInputTokens != 2000 {
			t.Fatalf("usage %+v", msg.Usage)
		}
		// streamed: the split comes in message_start
		s := c.Messages.NewStreaming(ctx, params)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		// Claude on Bedrock: Converse's cacheDetails, by TTL
		br.Set(func(b *gatewaytest.Behavior) {
			b.PromptTokens, b.CompletionTokens, b.CachedTokens = 10_000, 100, 1000
			b.CacheWriteTokens, b.CacheWrite1hTokens = 6000, 4000
		})
		params.Model = "claude-on-bedrock"
		if _, err := c.Messages.New(ctx, params); err != nil {
			t.Fatal(err)
		}
		// 3000 uncached at 3, 2000 5-minute writes at 3.75, 4000 1-hour
		// writes at 6, 1000 read at 0.30, 100 out at 15
		want := int64(9000 + 7500 + 24_000 + 300 + 1500)
		rows := gw.WaitUsage("cacher", 3)
		for i, r := range rows {
			if r.Cost != want {
				t.Errorf("row %d: cost %d, want %d (every write at the 5-minute price: %d)", i, r.Cost, want, want-9000)
			}
		}
	})

	t.Run("a plan charges its multiplier per model", func(t *testing.T) {
		key := gw.AddUser("planned", 0)
		gw.CLI("user", "plan", "--username", "planned", "--plan", "pro", "--days", "30")
		an.Set(func(b *gatewaytest.Behavior) {
			b.PromptTokens, b.CompletionTokens, b.CachedTokens, b.CacheWriteTokens, b.CacheWrite1hTokens = 1001, 100, 0, 0, 0
		})
		for _, model := range []string{"claude-opus-4-1", "claude-sonnet-4-5"} {
			if _, err := chat(key, model, "hi", 100); err != nil {
				t.Fatalf("%s: %v", model, err)
			}
		}
		rows := gw.WaitUsage("planned", 2)
		// opus at 2x: (1001 x 15 + 100 x 75) x 2 = (15,015 + 7,500) x 2;
		// sonnet at 0.5x: (3,003 + 1,500) / 2 = 2,251.5, rounded up
		if rows[0].Cost != 45_030 || rows[1].Cost != 2252 || rows[0].Plan != "pro" || rows[1].Plan != "pro" {
			t.Fatalf("rows: %d %q, %d %q", rows[0].Cost, rows[0].Plan, rows[1].Cost, rows[1].Plan)
		}
		if q, used := gw.Quota("planned"); q != 0 || used != 0 {
			t.Fatalf("the plan paid, yet the balance moved: %d %d", q, used)
		}
		// the plan's daily USD 1 holds 1,000,000 - 47,282 more: an opus
		// request reserving more than that at 2x is refused
		_, err := chat(key, "claude-opus-4-1", "hi", 6_400)
		apiError(t, err, 429, "budget_exceeded")
	})

	t.Run("prices from a catalogue file", func(t *testing.T) {
		key := gw.AddUser("importer", 1_000_000)
		oa.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens, b.CachedTokens = 10, 20, 0 })
		if _, err := chat(key, "gpt-4o-mini", "hi", 20); err != nil {
			t.Fatal(err)
		}
		// 10 x 0.15 + 20 x 0.60 = 13.5, rounded up
		if rows := gw.WaitUsage("importer", 1); rows[0].Cost != 14 {
			t.Fatalf("row %+v", rows[0])
		}
		// the CLI prints the same price as lines a Caddyfile takes
		out := gw.CLI("prices", "import", catalogueFile(t), "--model", "gpt-4o-mini")
		if out != "price gpt-4o-mini {\n\tinput 0.15\n\toutput 0.6\n\tcached_input 0.075\n\tmax_output 16384\n}\n" {
			t.Fatalf("printed %q", out)
		}
		// --diff against the running config (its catalogue included):
		// gpt-4o-mini is the same, gemini-2.5-pro lacks the max_output
		out = gw.CLI("prices", "import", catalogueFile(t), "--diff", "--model", "gpt-4o-mini", "--model", "gemini-2.5-pro")
		if !strings.HasPrefix(out, "# changed: gemini-2.5-pro: max_output 0 -> 65535\nprice gemini-2.5-pro {\n") ||
			!strings.HasSuffix(out, "}\n# 1 of the 2 models read are priced the same in the config\n") {
			t.Fatalf("diff:\n%s", out)
		}
		// a catalogue with a bad entry for a model it is kept to is refused
		// at a reload, naming it; the running config stays
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte(`{"gpt-4o-mini": {"input_cost_per_token": "cheap"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		msg, err := gw.TryReload(pricesConfig().String(), gatewaytest.Vars{"OA": oa.URL, "AN": an.URL, "BR": br.URL, "GE": ge.URL, "CATALOGUE": bad})
		if err == nil || !strings.Contains(msg, `prices_file `+bad+`: model gpt-4o-mini: input_cost_per_token:`) {
			t.Fatalf("reload with a bad catalogue: %v %s", err, msg)
		}
		if _, err := chat(key, "gpt-4o-mini", "hi", 20); err != nil {
			t.Fatal(err)
		}
	})
}
