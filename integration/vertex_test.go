package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Vertex AI (type vertex): Gemini and Claude reached through a fake
// Vertex that checks the service account's signed assertions and the
// access token on every call (gatewaytest.FakeVertex).

const (
	vertexProject  = "gw-test-project"
	vertexLocation = "us-east5"
	vertexGemini   = "gemini-2.5-flash"
	vertexClaude   = "claude-sonnet-4-5"
)

// vertexSetup is a gateway with a Gemini and a Claude channel on one fake
// Vertex, both keyed by one service account file.
type vertexSetup struct {
	gw     *gatewaytest.Gateway
	fake   *gatewaytest.FakeVertex
	saPath string
	email  string
}

// vertexConfig has the two channels, the service account read from its
// file by the {file.*} placeholder (so a reload reads it again).
func vertexConfig() *caddyfile {
	adapter := block("vertex", "project "+vertexProject, "location "+vertexLocation)
	return gatewayConfig().
		channel("vx-gemini", adapter, "{{VERTEX}}", "{file.{{SA}}}", vertexGemini).
		channel("vx-claude", adapter, "{{VERTEX}}", "{file.{{SA}}}", vertexClaude).
		price(vertexGemini, "input 0.30", "output 2.50", "cached_input 0.075").
		price(vertexClaude, "input 3", "output 15", "cached_input 0.30")
}

func startVertex(t *testing.T) *vertexSetup {
	t.Helper()
	fake := gatewaytest.NewFakeVertex(t, vertexProject, vertexLocation)
	for _, f := range []gatewaytest.Fake{fake.Gemini, fake.Claude} {
		f.Set(func(b *gatewaytest.Behavior) {
			b.Reply, b.PromptTokens, b.CachedTokens, b.CompletionTokens = "Hello there", fakePrompt, fakeCached, fakeCompletion
		})
	}
	s := &vertexSetup{fake: fake}
	s.saPath, s.email = fake.ServiceAccount(t, t.TempDir(), "gateway")
	s.gw = gatewaytest.Start(t, vertexConfig().String(), s.vars())
	return s
}

func (s *vertexSetup) vars() gatewaytest.Vars {
	return gatewaytest.Vars{"VERTEX": s.fake.BaseURL(), "SA": s.saPath}
}

// chat sends one OpenAI chat request and returns its error.
func (s *vertexSetup) chat(key, model string) error {
	client := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	return err
}

// Each SDK reaches Gemini and Claude on Vertex, with tools, parallel
// calls, an image and streaming; each request is billed on Vertex's own
// counts, to the unit; one token exchange per channel serves them all.
func TestVertexClients(t *testing.T) {
	s := startVertex(t)
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
		{"openai", func(t *testing.T, key, model, system string, stream bool) conversation {
			return openaiConversation(t, s.gw, key, model, system, stream)
		}},
	}
	// 30 fresh + 5 cached prompt tokens and 12 out, as the matrix
	cost := map[string]int64{vertexGemini: 40, vertexClaude: 272}
	channel := map[string]string{vertexGemini: "vx-gemini", vertexClaude: "vx-claude"}
	t.Run("conversations", func(t *testing.T) {
		for _, c := range clients {
			for _, model := range []string{vertexGemini, vertexClaude} {
				for _, stream := range []bool{false, true} {
					name := fmt.Sprintf("%s to %s", c.name, model)
					if stream {
						name += " streaming"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						user := strings.NewReplacer(" ", "-").Replace(name)
						key := s.gw.AddUser(user, 10_000_000)
						system := systemPrompt + " [" + user + "]"
						conv := c.run(t, key, model, system, stream)
						if len(conv.calls) != len(gatewaytest.WeatherCalls) || conv.text1 != gatewaytest.ToolText || conv.text2 != "Weather: 18C, 21C." {
							t.Errorf("conversation %+v", conv)
						}
						for _, r := range s.gw.WaitUsage(user, 2) {
							if r.PromptTokens != fakePrompt || r.CompletionTokens != fakeCompletion || r.Cost != cost[model] ||
								r.Estimated || r.Status != 200 || r.Channel != channel[model] || r.Stream != stream {
								t.Errorf("usage row %+v", r)
							}
						}
					})
				}
			}
		}
	})
	// 24 answered calls at Vertex's paths, each with a live token
	want := map[string]int{
		"google/models/" + vertexGemini + ":generateContent":       6,
		"google/models/" + vertexGemini + ":streamGenerateContent": 6,
		"anthropic/models/" + vertexClaude + ":rawPredict":         6,
		"anthropic/models/" + vertexClaude + ":streamRawPredict":   6,
	}
	got := map[string]int{}
	prefix := "/v1/projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/"
	for _, c := range s.fake.Calls() {
		if c.Status != 200 || c.Identity != s.email {
			t.Errorf("call %+v", c)
		}
		got[strings.TrimPrefix(c.Path, prefix)]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	// the Claude body went without its model, with Vertex's version (the
	// fake refuses anything else), the Gemini one to Gemini's wire
	if n := len(s.fake.Exchanges()); n != 2 {
		t.Errorf("%d token exchanges for 24 calls on 2 channels, want one per channel", n)
	}
	if logs := s.gw.Logs(); strings.Contains(logs, "ya29.") || strings.Contains(logs, "PRIVATE KEY") {
		t.Error("a token or the private key reached the log")
	}
}

// The token is refreshed when it is about to expire, and once when Vertex
// refuses it with a 401; a second 401 is the channel's failure, not a loop.
func TestVertexTokenRefresh(t *testing.T) {
	s := startVertex(t)
	key := s.gw.AddUser("refresh", 10_000_000)

	// a token that expires within the gateway's margin is used once
	s.fake.SetTokenLife(60e9)
	for range 3 {
		if err := s.chat(key, vertexGemini); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.fake.Exchanges()); n != 3 {
		t.Fatalf("%d exchanges for 3 calls with tokens about to expire, want 3", n)
	}

	// a long-lived token, then revoked: a 401, one exchange, the call sent again
	s.fake.SetTokenLife(3600e9)
	if err := s.chat(key, vertexGemini); err != nil {
		t.Fatal(err)
	}
	s.fake.ExpireTokens()
	before := len(s.fake.Calls())
	if err := s.chat(key, vertexGemini); err != nil {
		t.Fatalf("the call after a 401 failed: %v", err)
	}
	calls := s.fake.Calls()[before:]
	if len(calls) != 2 || calls[0].Status != 401 || calls[1].Status != 200 {
		t.Fatalf("calls after the token was revoked: %+v", calls)
	}
	if n := len(s.fake.Exchanges()); n != 5 {
		t.Fatalf("%d exchanges, want 5", n)
	}
	// still cached
	if err := s.chat(key, vertexGemini); err != nil || len(s.fake.Exchanges()) != 5 {
		t.Fatalf("%v, %d exchanges", err, len(s.fake.Exchanges()))
	}

	// every token refused: one retry, then the client gets the failure
	s.fake.RejectAll(true)
	before = len(s.fake.Calls())
	err := s.chat(key, vertexGemini)
	if err == nil {
		t.Fatal("a call Vertex refused twice succeeded")
	}
	if n := len(s.fake.Calls()) - before; n != 2 {
		t.Fatalf("%d calls for a request refused twice, want 2 (one retry)", n)
	}
}

// A new service account written to the key's file is used after
// `caddy reload --force`; the old one no longer is.
func TestVertexServiceAccountRotation(t *testing.T) {
	s := startVertex(t)
	key := s.gw.AddUser("rotate", 10_000_000)
	if err := s.chat(key, vertexClaude); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	newPath, newEmail := s.fake.ServiceAccount(t, dir, "rotated")
	b, err := os.ReadFile(newPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.saPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// the Caddyfile is unchanged: an unforced reload would be skipped
	s.gw.ForceReload()
	before := len(s.fake.Calls())
	for range 2 {
		if err := s.chat(key, vertexClaude); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range s.fake.Calls()[before:] {
		if c.Identity != newEmail {
			t.Errorf("after the reload a call went as %q, want %q", c.Identity, newEmail)
		}
	}
	ex := s.fake.Exchanges()
	if ex[0] != s.email || ex[len(ex)-1] != newEmail {
		t.Errorf("exchanges %v", ex)
	}
}

// A key that is no service account file is refused when the config is
// loaded (validate, reload), in words that say what is wrong and show
// nothing of the file; the running gateway keeps its config.
func TestVertexBadServiceAccountRefused(t *testing.T) {
	s := startVertex(t)
	dir := t.TempDir()
	cases := []struct{ name, file, msg string }{
		{"api key", "AIzaSyD-not-a-service-account-0123456789", "not a service account's JSON key file"},
		{"truncated", `{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg`, "not valid JSON"},
		{"no key", `{"type": "service_account", "client_email": "x@p.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"}`, "has no private_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			if err := os.WriteFile(bad, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			vars := gatewaytest.Vars{"VERTEX": s.fake.BaseURL(), "SA": bad}
			out, err := s.gw.TryReload(vertexConfig().String(), vars)
			want := `vx-gemini\\\": vertex key 1: `
			if err == nil || !strings.Contains(out, want) || !strings.Contains(out, c.msg) {
				t.Fatalf("reload with a bad service account: %v\n%s", err, out)
			}
			if strings.Contains(out, "BEGIN") || strings.Contains(out, "AIza") {
				t.Errorf("the refusal shows the file:\n%s", out)
			}
			// caddy validate says the same before anything runs
			path := filepath.Join(dir, "Caddyfile")
			cfg := strings.NewReplacer("{{ADMIN}}", "127.0.0.1:0", "{{DB}}", filepath.Join(dir, "gw.db"), "{{PORT}}", "0",
				"{{VERTEX}}", s.fake.BaseURL(), "{{SA}}", bad).Replace(vertexConfig().String())
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(gatewaytest.Binary(t), "validate", "--config", path, "--adapter", "caddyfile")
			cmd.Dir = dir
			vout, verr := cmd.CombinedOutput()
			if verr == nil || !strings.Contains(string(vout), c.msg) {
				t.Fatalf("caddy validate with a bad service account: %v\n%s", verr, vout)
			}
		})
	}
	// the old config still serves
	if err := s.chat(s.gw.AddUser("still", 10_000_000), vertexGemini); err != nil {
		t.Fatal(err)
	}
}

// Imagen on Vertex behind OpenAI's images shape: :predict at the model's
// publisher path with the channel's token, billed per image; an edit on a
// Gemini image model, billed by tokens; a Claude channel has no images
// endpoint.
func TestVertexImagen(t *testing.T) {
	fake := gatewaytest.NewFakeVertex(t, vertexProject, vertexLocation)
	saPath, email := fake.ServiceAccount(t, t.TempDir(), "images")
	adapter := block("vertex", "project "+vertexProject, "location "+vertexLocation)
	cfg := gatewayConfig().
		channel("vx-imagen", adapter, "{{VERTEX}}", "{file.{{SA}}}", "imagen-4.0-generate-001 gemini-2.5-flash-image").
		channel("vx-claude", adapter, "{{VERTEX}}", "{file.{{SA}}}", vertexClaude).
		price("imagen-4.0-generate-001", "image 0.04").
		price("gemini-2.5-flash-image", "input 0.30", "output 30").
		price(vertexClaude, "input 3", "output 15")
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"VERTEX": fake.BaseURL(), "SA": saPath})
	key := gw.AddUser("imagen", 10_000_000)
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "imagen-4.0-generate-001", Prompt: "a red fox", N: openai.Int(2), Size: "1792x1024"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 {
		t.Fatalf("answer %+v", res)
	}
	for i, d := range res.Data {
		if png, _ := base64.StdEncoding.DecodeString(d.B64JSON); !bytes.Equal(png, gatewaytest.FakePNG(i)) {
			t.Fatalf("image %d is not the upstream's", i)
		}
	}
	calls := fake.Calls()
	if len(calls) != 1 || calls[0].Identity != email ||
		calls[0].Path != "/v1/projects/"+vertexProject+"/locations/"+vertexLocation+"/publishers/google/models/imagen-4.0-generate-001:predict" {
		t.Fatalf("calls %+v", calls)
	}
	rows := gw.WaitUsage("imagen", 1)
	if rows[0].Cost != 2*40_000 || rows[0].Status != 200 || rows[0].Channel != "vx-imagen" {
		t.Errorf("usage row %+v", rows[0])
	}

	// an edit on a Gemini image model: the images streamed inline, byte for byte
	a, b := randomBytes(12, 200<<10), randomBytes(13, 100<<10)
	edit, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gemini-2.5-flash-image", Prompt: "put them side by side",
		Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(a), "a.png", "image/png"), openai.File(bytes.NewReader(b), "b.jpg", "image/jpeg")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(edit.Data) != 1 || edit.Usage.OutputTokens != 1290 {
		t.Fatalf("answer %+v", edit)
	}
	reqs := fake.Gemini.Requests()
	last := reqs[len(reqs)-1]
	if last.Prompt != "put them side by side" || len(last.Files) != 2 || last.Files[0].SHA256 != sha(a) || last.Files[1].SHA256 != sha(b) {
		t.Fatalf("Gemini got %q %+v", last.Prompt, last.Files)
	}
	if calls := fake.Calls(); calls[len(calls)-1].Path != "/v1/projects/"+vertexProject+"/locations/"+vertexLocation+"/publishers/google/models/gemini-2.5-flash-image:generateContent" {
		t.Fatalf("calls %+v", calls)
	}
	if rows := gw.WaitUsage("imagen", 2); rows[1].Cost != perMillion(9, 300_000, 1290, 30_000_000) {
		t.Errorf("usage row %+v", rows[1])
	}

	_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: vertexClaude, Prompt: "a red fox"})
	if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "which has no image generations endpoint") {
		t.Fatalf("an image from a Claude model: %v", err)
	}
}

// A service account whose key Google no longer accepts (deleted in the
// console: the assertion's signature fails) makes the channel fail with a
// 502 to the client, and the log says why without the key.
func TestVertexRefusedServiceAccount(t *testing.T) {
	fake := gatewaytest.NewFakeVertex(t, vertexProject, vertexLocation)
	dir := t.TempDir()
	goodPath, _ := fake.ServiceAccount(t, dir, "kept")
	otherPath, _ := fake.ServiceAccount(t, dir, "other")
	var good, other map[string]string
	for path, v := range map[string]*map[string]string{goodPath: &good, otherPath: &other} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	good["private_key"] = other["private_key"] // the account's key, deleted and replaced
	b, _ := json.Marshal(good)
	stale := filepath.Join(dir, "stale.json")
	if err := os.WriteFile(stale, b, 0o600); err != nil {
		t.Fatal(err)
	}
	adapter := block("vertex", "project "+vertexProject, "location "+vertexLocation)
	cfg := gatewayConfig().
		channel("vx-gemini", adapter, "{{VERTEX}}", "{file.{{SA}}}", vertexGemini).
		price(vertexGemini, "input 0.30", "output 2.50")
	gw := gatewaytest.Start(t, cfg.String(), gatewaytest.Vars{"VERTEX": fake.BaseURL(), "SA": stale})
	s := &vertexSetup{gw: gw, fake: fake}
	err := s.chat(gw.AddUser("stale", 10_000_000), vertexGemini)
	if e := sdkError(t, err); e.StatusCode != 502 {
		t.Fatalf("a refused service account: %v", err)
	}
	if len(fake.Calls()) != 0 || len(fake.Exchanges()) != 0 {
		t.Fatalf("Vertex was called (%d) or a token issued (%d)", len(fake.Calls()), len(fake.Exchanges()))
	}
	// the log reaches the test through a pipe, a moment after the answer
	logs := waitLog(t, gw.Logs, "invalid_grant: Invalid JWT Signature.")
	if strings.Contains(logs, "PRIVATE KEY") {
		t.Fatalf("the log does not say why, or shows the key:\n%s", logs)
	}
}

// Token counts are asked of Vertex for its own dialect's clients: Claude's
// at count-tokens:rawPredict, Gemini's at :countTokens; counting is free.
func TestVertexCountTokens(t *testing.T) {
	s := startVertex(t)
	key := s.gw.AddUser("count", 10_000_000)
	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithBaseURL(s.gw.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	n, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(vertexClaude),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("how many tokens?"))}})
	if err != nil || n.InputTokens != gatewaytest.CountTokens {
		t.Fatalf("Claude's count: %v, %v", n, err)
	}
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.gw.URL}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gc.Models.CountTokens(ctx, vertexGemini, []*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{{Text: "how many tokens?"}}}}, nil)
	if err != nil || g.TotalTokens != gatewaytest.CountTokens {
		t.Fatalf("Gemini's count: %v, %v", g, err)
	}
	prefix := "/v1/projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/"
	var paths []string
	for _, c := range s.fake.Calls() {
		paths = append(paths, strings.TrimPrefix(c.Path, prefix))
	}
	if fmt.Sprint(paths) != "[anthropic/models/count-tokens:rawPredict google/models/"+vertexGemini+":countTokens]" {
		t.Fatalf("calls %v", paths)
	}
	if _, used := s.gw.Quota("count"); used != 0 {
		t.Errorf("counting cost %d units", used)
	}
}
