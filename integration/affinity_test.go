package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Prompt-cache affinity: a conversation stays on the channel and key that
// answered it, so a vendor that caches prompts per key (the fake
// gatewaytest.FakePromptCache) reads its prefix from cache on every turn
// after the first; ejection, a 429 or a failure move it, and one caller's
// conversation names do not steer another's.

var cacheKeys = []string{"sk-cache-0", "sk-cache-1", "sk-cache-2", "sk-cache-3"}

// cacheConfig is one channel of four keys on the caching fake.
func cacheConfig() *caddyfile {
	return gatewayConfig().
		channel("cache", "openai", "{{UP}}", "", "gpt-cache", "keys "+strings.Join(cacheKeys, " ")).
		price("gpt-cache", "input 1", "cached_input 0.1", "output 2").
		withSite(
			"@account path /api/user/* /api/admin/*",
			block("route @account", "gateway_account"),
			"@console path / /console /console/*",
			block("route @console", "gateway_console"),
			"@models path /v1/*",
			block("route @models", "gateway_auth", "gateway_relay"))
}

// words is n words of filler tagged by tag, so every message is its own.
func words(tag string, n int) string {
	return strings.TrimSpace(strings.Repeat(tag+" ", n))
}

// conversation is a chat the test holds: its history, sent whole each turn.
type cacheConversation struct {
	name string
	msgs []openai.ChatCompletionMessageParamUnion
}

func newConversation(name string) *cacheConversation {
	return &cacheConversation{name: name, msgs: []openai.ChatCompletionMessageParamUnion{
		// a system prompt of its own, so no conversation reads another's
		// prefix from cache and the ideal below is exact
		openai.SystemMessage(words(name+"-system", 1100)),
		openai.UserMessage(name + " " + words("start", 50)),
	}}
}

// turn sends the conversation's next turn and keeps the answer.
func (c *cacheConversation) turn(t *testing.T, client *openai.Client, opts ...option.RequestOption) error {
	t.Helper()
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-cache", Messages: c.msgs}, opts...)
	if err != nil {
		return err
	}
	c.msgs = append(c.msgs, openai.AssistantMessage(resp.Choices[0].Message.Content),
		openai.UserMessage(words(fmt.Sprintf("%s-turn%d", c.name, len(c.msgs)), 150)))
	return nil
}

// keysOf is each conversation's keys, in the order its answered turns used them.
func keysOf(served []gatewaytest.Served) map[string][]string {
	out := map[string][]string{}
	for _, s := range served {
		if s.Status == http.StatusOK {
			name := strings.Fields(s.Conversation)[0]
			out[name] = append(out[name], s.Key)
		}
	}
	return out
}

func distinct(keys []string) int {
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	return len(seen)
}

// cacheRun drives conversations x turns through a gateway of cfg, the
// conversations in a shuffled order each turn as independent clients
// would come, and returns what the upstream served.
func cacheRun(t *testing.T, cfg *caddyfile, conversations, turns int) (*gatewaytest.Gateway, []gatewaytest.Served) {
	up := gatewaytest.NewFakePromptCache(t, cacheKeys...)
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("alice", 100_000_000)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	convs := make([]*cacheConversation, conversations)
	for i := range convs {
		convs[i] = newConversation(fmt.Sprintf("conv%d", i))
	}
	order := rand.New(rand.NewPCG(22, 22))
	for range turns {
		order.Shuffle(len(convs), func(i, j int) { convs[i], convs[j] = convs[j], convs[i] })
		for _, c := range convs {
			if err := c.turn(t, &client); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	return gw, up.Served()
}

// cacheShare is the cached share of the prompt tokens served, and the
// share an ideal router gets: every turn after a conversation's first
// reads the whole previous turn's prompt from cache.
func cacheShare(served []gatewaytest.Served) (share, ideal float64, fullHits int) {
	var prompt, cached, best int64
	last := map[string]int64{}
	for _, s := range served {
		name := strings.Fields(s.Conversation)[0]
		prompt += s.PromptTokens
		cached += s.CachedTokens
		want := last[name] - last[name]%128
		best += want
		if want > 0 && s.CachedTokens == want {
			fullHits++
		}
		last[name] = s.PromptTokens
	}
	return float64(cached) / float64(prompt), float64(best) / float64(prompt), fullHits
}

func TestAffinityKeepsThePromptCache(t *testing.T) {
	const conversations, turns = 10, 20
	later := conversations * (turns - 1) // turns after each conversation's first

	t.Run("with affinity", func(t *testing.T) {
		gw, served := cacheRun(t, cacheConfig(), conversations, turns)
		share, ideal, full := cacheShare(served)
		t.Logf("cached share %.3f, ideal %.3f, full hits %d of %d", share, ideal, full, later)
		if full != later || share != ideal {
			t.Errorf("cached share %.3f with %d full hits, want the ideal %.3f with %d", share, full, ideal, later)
		}
		for name, keys := range keysOf(served) {
			if distinct(keys) != 1 {
				t.Errorf("%s went to keys %v, want one", name, keys)
			}
		}
		// the conversations spread over the keys (evenly over many: see
		// engine's TestPlacement)
		used := map[string]bool{}
		for _, keys := range keysOf(served) {
			used[keys[0]] = true
		}
		if len(used) < 2 {
			t.Errorf("conversations bound to %d keys of %d", len(used), len(cacheKeys))
		}
		// billed: cached tokens at the cached price
		var cost, cached int64
		for _, r := range gw.WaitUsage("alice", conversations*turns) {
			cost += r.Cost
			cached += r.CachedTokens
		}
		var wantCost, wantCached, wantPrompt int64
		for _, s := range served {
			wantCost += ceilDiv((s.PromptTokens-s.CachedTokens)*1_000_000+s.CachedTokens*100_000+3*2_000_000, 1_000_000)
			wantCached += s.CachedTokens
			wantPrompt += s.PromptTokens
		}
		if cost != wantCost || cached != wantCached {
			t.Errorf("usage rows cost %d with %d cached tokens, want %d and %d", cost, cached, wantCost, wantCached)
		}
		// the operator's dashboard shows the share per model, channel and key
		var dash struct {
			Models []dashCache `json:"models"`
			Recent struct {
				Channels []dashCache `json:"channels"`
				Keys     []dashCache `json:"keys"`
			} `json:"recent"`
		}
		loggedIn(t, gw, "ops", 0, "admin").ok("GET", "/api/admin/dashboard?days=1", nil).decode(t, &dash)
		for what, list := range map[string][]dashCache{"models": dash.Models, "channels": dash.Recent.Channels, "keys": dash.Recent.Keys} {
			if len(list) != 1 || list[0].Prompt != wantPrompt || list[0].Cached != wantCached {
				t.Errorf("dashboard %s: %+v, want one with %d of %d prompt tokens cached", what, list, wantCached, wantPrompt)
			}
		}
		m := gw.Metrics()
		if got := m[genaiCacheSeries("gen_ai_client_token_usage_sum", "cached_input")]; int64(got) != wantCached {
			t.Errorf("gen_ai_client_token_usage cached_input sum %v, want %d", got, wantCached)
		}
		for _, reason := range []string{"ejected", "rate_limited", "failed", "unavailable", "key_removed"} {
			if got := m[series("gateway_affinity_moves_total", "reason", reason)]; got != 0 {
				t.Errorf("%v moves for %s with nothing failing", got, reason)
			}
		}
		// the console's Cached column says it, per model, key and channel (last:
		// a PostgreSQL run ends the test where the browser starts)
		b := adminBrowser(t, gw, "boss")
		b.open("/console/dashboard", `document.getElementById('admin').dataset.loading === 'no' && document.querySelectorAll('#by-rows tr').length === 1`)
		want := fmt.Sprintf("%.1f%%", 100*float64(wantCached)/float64(wantPrompt))
		for _, tab := range []string{"model", "key", "channel"} {
			b.do(chromedp.Click(chromedp.ID("tab-" + tab)))
			if got := evalJS[string](b, `document.querySelector('#by-rows tr').children[5].textContent`); got != want {
				t.Errorf("the dashboard's Cached column for the %s says %q, want %s", tab, got, want)
			}
		}
	})

	t.Run("without affinity", func(t *testing.T) {
		_, served := cacheRun(t, cacheConfig().option("affinity off"), conversations, turns)
		share, ideal, full := cacheShare(served)
		t.Logf("cached share %.3f, ideal %.3f, full hits %d of %d", share, ideal, full, later)
		// a turn finds its whole previous prompt only on the key that
		// served it: about one turn in four
		if full < later/8 || full > later*3/8 {
			t.Errorf("%d full hits of %d without affinity, want about a quarter", full, later)
		}
		if share >= ideal*0.9 {
			t.Errorf("cached share %.3f without affinity, near the ideal %.3f", share, ideal)
		}
	})
}

// dashCache is what the dashboard says of one model's, channel's or key's cache.
type dashCache struct {
	Name   string `json:"name"`
	Prompt int64  `json:"prompt_tokens"`
	Cached int64  `json:"cached_tokens"`
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func genaiCacheSeries(name, tokenType string) string {
	return series(name, "channel", "cache", "gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "gpt-cache", "gen_ai_token_type", tokenType)
}

// TestAffinityMoves: a conversation leaves a channel that is ejected or
// fails it, and a key that answers 429, for one that answers, and stays
// there; each move is counted by reason.
func TestAffinityMoves(t *testing.T) {
	t.Run("ejected channel", func(t *testing.T) {
		up := gatewaytest.NewFakePromptCache(t, "sk-a", "sk-b")
		cfg := gatewayConfig().
			option("max_attempts 2").
			option(block("health", "consecutive_failures 1", "base_ejection 10m")).
			channel("a", "openai", "{{UP}}", "sk-a", "gpt-cache").
			channel("b", "openai", "{{UP}}", "sk-b", "gpt-cache").
			free("gpt-cache")
		gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": up.URL})
		key := gw.AddUser("alice", 0)
		client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		convs := make([]*cacheConversation, 8)
		for i := range convs {
			convs[i] = newConversation(fmt.Sprintf("conv%d", i))
			for range 2 {
				if err := convs[i].turn(t, &client); err != nil {
					t.Fatal(err)
				}
			}
		}
		// the two channels are of one priority, tried in a weighted random
		// order: the binding puts a conversation's channel first
		before := keysOf(up.Served())
		for name, keys := range before {
			if distinct(keys) != 1 {
				t.Errorf("%s went to %v over its first two turns, want one channel", name, keys)
			}
		}
		// the channel of conv0 fails once: conv0 fails over to the other,
		// and the failed one is ejected, so the others bound to it move too
		failing, other := before["conv0"][0], "sk-b"
		if failing == "sk-b" {
			other = "sk-a"
		}
		onFailing := 0
		for _, keys := range before {
			if keys[0] == failing {
				onFailing++
			}
		}
		up.Fail(failing, http.StatusInternalServerError, 1)
		for range 3 {
			for _, c := range convs {
				if err := c.turn(t, &client); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, keys := range keysOf(up.Served()) {
			for _, k := range keys[2:] {
				if k != other {
					t.Errorf("%s answered on %v after %s's channel was ejected", name, keys, failing)
				}
			}
		}
		m := gw.Metrics()
		if got := m[series("gateway_affinity_moves_total", "reason", "failed")]; got != 1 {
			t.Errorf("%v moves for a failure, want 1", got)
		}
		if got := m[series("gateway_affinity_moves_total", "reason", "ejected")]; got != float64(onFailing-1) {
			t.Errorf("%v moves for ejection, want %d", got, onFailing-1)
		}
		// after its one move each conversation reads its prompt from b's cache
		served := up.Served()
		last := served[len(served)-len(convs):]
		for _, s := range last {
			if s.CachedTokens == 0 {
				t.Errorf("%s's last turn missed the cache on %s", strings.Fields(s.Conversation)[0], s.Key)
			}
		}
	})

	t.Run("429 moves to the next key", func(t *testing.T) {
		up := gatewaytest.NewFakePromptCache(t, cacheKeys...)
		gw := gatewaytest.Start(t, cacheConfig().String(), gatewaytest.Vars{"UP": up.URL})
		key := gw.AddUser("alice", 100_000_000)
		client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		c, other := newConversation("limited"), newConversation("bystander")
		for range 2 {
			for _, cv := range []*cacheConversation{c, other} {
				if err := cv.turn(t, &client); err != nil {
					t.Fatal(err)
				}
			}
		}
		bound := keysOf(up.Served())["limited"][0]
		up.Fail(bound, http.StatusTooManyRequests, 1)
		err := c.turn(t, &client)
		if code := sdkStatus(err); code != http.StatusTooManyRequests {
			t.Fatalf("the rate limited turn: %v, want a 429", err)
		}
		for range 3 {
			for _, cv := range []*cacheConversation{c, other} {
				if err := cv.turn(t, &client); err != nil {
					t.Fatal(err)
				}
			}
		}
		keys := keysOf(up.Served())
		moved := keys["limited"][2:]
		if distinct(moved) != 1 || moved[0] == bound {
			t.Errorf("after a 429 on %s the conversation went to %v, want one other key", bound, moved)
		}
		if distinct(keys["bystander"]) != 1 {
			t.Errorf("the other conversation moved: %v", keys["bystander"])
		}
		if got := gw.Metrics()[series("gateway_affinity_moves_total", "reason", "rate_limited")]; got != 1 {
			t.Errorf("%v moves for a 429, want 1", got)
		}
	})
}

// TestAffinityRevokedKey: conversations placed on a key the vendor
// refuses fail one turn, then move to the channel's next key and stay.
func TestAffinityRevokedKey(t *testing.T) {
	up := gatewaytest.NewFakePromptCache(t, cacheKeys[:3]...) // the fourth is revoked
	gatewaytest.Secret(cacheKeys[3])
	gw := gatewaytest.Start(t, cacheConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("alice", 100_000_000)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	failed := 0
	for i := range 12 {
		c := newConversation(fmt.Sprintf("conv%d", i))
		for turn := 0; turn < 3; {
			err := c.turn(t, &client)
			switch {
			case err == nil:
				turn++
			case turn == 0 && sdkStatus(err) == http.StatusBadGateway:
				failed++ // placed on the revoked key: the next try moves
			default:
				t.Fatalf("%s turn %d: %v", c.name, turn, err)
			}
			if failed > 12 {
				t.Fatal("a conversation keeps failing on the revoked key")
			}
		}
	}
	if failed == 0 {
		t.Fatal("no conversation was placed on the revoked key: the test shows nothing")
	}
	for name, keys := range keysOf(up.Served()) {
		if distinct(keys) != 1 || len(keys) != 3 {
			t.Errorf("%s answered on %v, want its three turns on one key", name, keys)
		}
	}
}

// sdkStatus is the HTTP status of an openai-go error, 0 for another error.
func sdkStatus(err error) int {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// TestAffinityScopedToTheCallersKey: two callers naming their
// conversations alike each get a binding of their own, and the names a
// client sends (prompt_cache_key, a session header) hold a conversation
// together across prompts that share nothing.
func TestAffinityScopedToTheCallersKey(t *testing.T) {
	up := gatewaytest.NewFakePromptCache(t, cacheKeys...)
	// Caddy drops headers with underscores unless told (Codex's session_id)
	cfg := cacheConfig().withServers("expected_underscore_headers session_id")
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"UP": up.URL})
	alice := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(gw.AddUser("alice", 100_000_000)), option.WithMaxRetries(0))
	mallory := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(gw.AddUser("mallory", 100_000_000)), option.WithMaxRetries(0))
	try := func(client *openai.Client, prompt string, opts ...option.RequestOption) (string, error) {
		t.Helper()
		n := len(up.Served())
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-cache",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}, opts...)
		return up.Served()[n].Key, err
	}
	ask := func(client *openai.Client, prompt string, opts ...option.RequestOption) string {
		t.Helper()
		k, err := try(client, prompt, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	cacheKey := func(name string) option.RequestOption { return option.WithJSONSet("prompt_cache_key", name) }

	// different prompts, one prompt_cache_key: one key
	a := ask(&alice, "alpha one", cacheKey("shared-name"))
	for _, p := range []string{"beta two", "gamma three", "delta four"} {
		if k := ask(&alice, p, cacheKey("shared-name")); k != a {
			t.Fatalf("alice's prompt_cache_key conversation moved from %s to %s", a, k)
		}
	}
	// mallory names hers the same and sends alice's very prompt, then
	// meets a 429, which moves her conversation to her channel's next key:
	// alice's stays where it was
	m := ask(&mallory, "alpha one", cacheKey("shared-name"))
	up.Fail(m, http.StatusTooManyRequests, 1)
	if _, err := try(&mallory, "epsilon", cacheKey("shared-name")); sdkStatus(err) != http.StatusTooManyRequests {
		t.Fatalf("mallory's rate limited request: %v", err)
	}
	moved := ask(&mallory, "epsilon", cacheKey("shared-name"))
	if moved == m {
		t.Fatalf("mallory's conversation stayed on %s after its 429", m)
	}
	for range 3 {
		if k := ask(&mallory, "epsilon", cacheKey("shared-name")); k != moved {
			t.Fatalf("mallory's conversation moved from %s to %s", moved, k)
		}
		if k := ask(&alice, "zeta", cacheKey("shared-name")); k != a {
			t.Fatalf("mallory's move steered alice's conversation from %s to %s", a, k)
		}
	}
	// a session header holds a conversation together the same way
	for _, header := range []string{"X-Claude-Code-Session-Id", "session_id", "X-Session-Id"} {
		s := ask(&alice, header+" first", option.WithHeader(header, "session-"+header))
		for _, p := range []string{"second", "third"} {
			if k := ask(&alice, p, option.WithHeader(header, "session-"+header)); k != s {
				t.Errorf("a conversation named by %s moved from %s to %s", header, s, k)
			}
		}
	}
}

// TestAutoCache: a channel with auto_cache marks Anthropic cache
// breakpoints (the system prompt and the last message) on requests whose
// client marked none, translated or not, and leaves a client's own marks
// as they are; a channel without it sends what it always did.
func TestAutoCache(t *testing.T) {
	auto := gatewaytest.NewFakeAnthropic(t, "sk-ant-auto")
	plain := gatewaytest.NewFakeAnthropic(t, "sk-ant-plain")
	gw := gatewaytest.Start(t, gatewayConfig().
		channel("auto", block("anthropic", "auto_cache on"), "{{AUTO}}", "sk-ant-auto", "claude-auto").
		channel("plain", "anthropic", "{{PLAIN}}", "sk-ant-plain", "claude-plain").
		free("claude-auto", "claude-plain").String(), gatewaytest.Vars{"AUTO": auto.BaseURL(), "PLAIN": plain.BaseURL()})
	key := gw.AddUser("cache", 0)
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	history := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 100,
			System: []anthropic.TextBlockParam{{Text: "You are terse."}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("first")),
				anthropic.NewAssistantMessage(anthropic.NewTextBlock("ok")),
				anthropic.NewUserMessage(anthropic.NewTextBlock("second")),
			}}
	}
	for _, model := range []string{"claude-auto", "claude-plain"} {
		if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."), openai.UserMessage("first"), openai.AssistantMessage("ok"), openai.UserMessage("second")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ac.Messages.New(ctx, history(model)); err != nil {
			t.Fatal(err)
		}
	}
	// a client that marks its own breakpoint: its body goes as it is
	own := history("claude-auto")
	own.Messages[0] = anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &anthropic.TextBlockParam{Text: "first", CacheControl: anthropic.NewCacheControlEphemeralParam()}})
	if _, err := ac.Messages.New(ctx, own); err != nil {
		t.Fatal(err)
	}

	type marked struct {
		System []struct {
			Text         string         `json:"text"`
			CacheControl map[string]any `json:"cache_control"`
		} `json:"system"`
		Messages []struct {
			Content []struct {
				Text         string         `json:"text"`
				CacheControl map[string]any `json:"cache_control"`
			} `json:"content"`
		} `json:"messages"`
	}
	breakpoints := func(r gatewaytest.Recorded) (where []string) {
		t.Helper()
		var m marked
		if err := json.Unmarshal(r.Raw, &m); err != nil {
			t.Fatalf("a system prompt or a content left a string where a breakpoint was due: %v\n%s", err, r.Raw)
		}
		for _, b := range m.System {
			if b.CacheControl != nil {
				where = append(where, "system:"+b.Text)
			}
		}
		for _, msg := range m.Messages {
			for _, b := range msg.Content {
				if b.CacheControl != nil {
					where = append(where, "message:"+b.Text)
				}
			}
		}
		return where
	}
	reqs := auto.Requests()
	if len(reqs) != 3 {
		t.Fatalf("auto channel got %d requests, want 3", len(reqs))
	}
	for i, what := range []string{"translated", "passthrough"} {
		if got := breakpoints(reqs[i]); strings.Join(got, ",") != "system:You are terse.,message:second" {
			t.Errorf("%s request on the auto_cache channel marked %v, want the system prompt and the last message", what, got)
		}
	}
	if got := breakpoints(reqs[2]); strings.Join(got, ",") != "message:first" {
		t.Errorf("a client's own breakpoint became %v", got)
	}
	for i, r := range plain.Requests() {
		if strings.Contains(string(r.Raw), "cache_control") {
			t.Errorf("request %d on the channel without auto_cache carries cache_control: %s", i, r.Raw)
		}
	}
}

// keyRecorder stands before a fake upstream for a channel of several keys:
// it records the key each request came with (Authorization or x-api-key)
// and passes the request on with the one key the fake knows.
type keyRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newKeyRecorder(t *testing.T, fake gatewaytest.Fake, fakeKey string) *keyRecorder {
	target, err := url.Parse(fake.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	kr := &keyRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // streams pass event by event
	kr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		if key != "" {
			r.Header.Set("X-Api-Key", fakeKey)
		} else if key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); key != "" {
			r.Header.Set("Authorization", "Bearer "+fakeKey)
		}
		kr.mu.Lock()
		kr.seen = append(kr.seen, key)
		kr.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(kr.Close)
	return kr
}

// keys are the keys seen since the first n requests.
func (kr *keyRecorder) keys(from int) []string {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return slices.Clone(kr.seen[from:])
}

// startKeyedClients is the real clients' gateway with four keys on the
// Anthropic and the OpenAI channel, each behind a keyRecorder.
func startKeyedClients(t *testing.T) (gw *gatewaytest.Gateway, claude, gpt *keyRecorder) {
	fakeAnt := gatewaytest.NewFakeAnthropic(t, "sk-ant-up")
	fakeOAI := gatewaytest.NewFakeOpenAI(t, "sk-oai-up")
	claude, gpt = newKeyRecorder(t, fakeAnt, "sk-ant-up"), newKeyRecorder(t, fakeOAI, "sk-oai-up")
	var antKeys, oaiKeys []string
	for i := range 4 {
		antKeys = append(antKeys, fmt.Sprintf("sk-ant-up-%d", i))
		oaiKeys = append(oaiKeys, fmt.Sprintf("sk-oai-up-%d", i))
	}
	for _, k := range append(antKeys, oaiKeys...) {
		gatewaytest.Secret(k)
	}
	cfg := gatewayConfig().
		// Codex names its session in a session_id header
		withServers("expected_underscore_headers session_id").
		channel("claude", "anthropic", "{{CLAUDE}}", "", "claude-test", "keys "+strings.Join(antKeys, " ")).
		channel("gpt", "openai", "{{GPT}}", "", "gpt-test", "keys "+strings.Join(oaiKeys, " ")).
		free("claude-test", "gpt-test")
	gw = gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"CLAUDE": claude.URL, "GPT": gpt.URL})
	return gw, claude, gpt
}

// TestAffinityAcrossRestart: bindings live in memory, but a conversation
// without one goes where its name places it, the same in every process:
// after a restart (or on another instance) its turns go on reading their
// prompt from the same key's cache.
func TestAffinityAcrossRestart(t *testing.T) {
	up := gatewaytest.NewFakePromptCache(t, cacheKeys...)
	gw := gatewaytest.Start(t, cacheConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("alice", 100_000_000)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	convs := make([]*cacheConversation, 6)
	turn := func() {
		t.Helper()
		for _, c := range convs {
			if err := c.turn(t, &client); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range convs {
		convs[i] = newConversation(fmt.Sprintf("conv%d", i))
	}
	turn()
	turn()
	gw.Restart()
	// in another order than before, so taking keys in turn would not land
	// each where it was
	slices.Reverse(convs)
	turn()
	for name, keys := range keysOf(up.Served()) {
		if distinct(keys) != 1 {
			t.Errorf("%s went to %v across the restart, want one key", name, keys)
		}
	}
	served := up.Served()
	for _, s := range served[len(served)-len(convs):] {
		if s.CachedTokens == 0 {
			t.Errorf("%s's turn after the restart missed the cache", strings.Fields(s.Conversation)[0])
		}
	}
}

// TestAffinityAcrossReload: a reload keeps the bindings (a conversation
// moved off its placed key by a 429 stays where it moved), and a reload that
// removes the bound key moves the conversation, counted as key_removed.
func TestAffinityAcrossReload(t *testing.T) {
	up := gatewaytest.NewFakePromptCache(t, cacheKeys...)
	vars := gatewaytest.Vars{"UP": up.URL}
	gw := gatewaytest.Start(t, cacheConfig().String(), vars)
	key := gw.AddUser("alice", 100_000_000)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	c := newConversation("reloaded")
	last := func() string {
		served := up.Served()
		return served[len(served)-1].Key
	}
	if err := c.turn(t, &client); err != nil {
		t.Fatal(err)
	}
	placed := last()
	up.Fail(placed, http.StatusTooManyRequests, 1)
	if err := c.turn(t, &client); sdkStatus(err) != http.StatusTooManyRequests {
		t.Fatalf("the rate limited turn: %v", err)
	}
	if err := c.turn(t, &client); err != nil {
		t.Fatal(err)
	}
	moved := last()
	if moved == placed {
		t.Fatalf("the conversation stayed on %s after a 429", placed)
	}

	// a real change (Caddy skips a reload to the same configuration)
	gw.Reload(cacheConfig().option("max_attempts 4").String(), vars)
	if got := gw.Metrics()[series("gateway_affinity_moves_total", "reason", "rate_limited")]; got != 0 {
		t.Fatalf("%v rate_limited moves after the reload: it did not happen", got)
	}
	// the first turn after a reload retries as the SDK does by default: a
	// connection the old server accepted as it stopped is closed under its
	// write (CI: "write: broken pipe"), which is Caddy's reload, not the
	// affinity this test is about
	if err := c.turn(t, &client, option.WithMaxRetries(2)); err != nil {
		t.Fatal(err)
	}
	if got := last(); got != moved {
		t.Fatalf("after a reload the conversation went to %s, want %s where it was bound", got, moved)
	}

	var kept []string
	for _, k := range cacheKeys {
		if k != moved {
			kept = append(kept, k)
		}
	}
	gw.Reload(cacheConfig().channel("cache", "openai", "{{UP}}", "", "gpt-cache", "keys "+strings.Join(kept, " ")).String(), vars)
	if err := c.turn(t, &client, option.WithMaxRetries(2)); err != nil {
		t.Fatal(err)
	}
	if got := last(); got == moved {
		t.Fatalf("the conversation still went to %s, a key no longer configured", got)
	}
	if got := gw.Metrics()[series("gateway_affinity_moves_total", "reason", "key_removed")]; got != 1 {
		t.Errorf("%v moves for a removed key, want 1", got)
	}
}
