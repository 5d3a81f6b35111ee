package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// The request bodies in testdata/clients were captured from the real
// programs pointed at a fake upstream: Claude Code 2.1 (claude -p "Say hi"
// --model gpt-4o-mini) and Codex CLI (codex exec "Say hi", by default and
// with web_search = "disabled" and features.multi_agent = false). Each is
// replayed here to a channel of every family, with only its model changed.

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/clients/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withModel(t *testing.T, body []byte, model string) []byte {
	t.Helper()
	out, err := adapters.SetFields(body, adapters.Field{Key: "model", Value: model})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sseEvents reads an event stream's event names and data.
func sseEvents(body []byte) (names []string, data []string) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			names, data = append(names, name), append(data, line[len("data: "):])
			name = ""
		}
	}
	return names, data
}

// TestClaudeCodeRequestsEveryFamily: Claude Code's first request of a
// session (adaptive thinking, cache_control, context_management,
// output_config, a system turn inside messages, 25 tools, a 32000-token
// limit) answered by a channel of each family as a Messages stream.
func TestClaudeCodeRequestsEveryFamily(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("claude-code", 10_000_000)
	body := fixture(t, "claude-code.json")
	var hdr map[string]string
	if err := json.Unmarshal(fixture(t, "claude-code.headers.json"), &hdr); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	for _, model := range []string{"claude-test", "gemini-test", "gpt-test"} {
		resp, out := s.gw.Do("POST", "/v1/messages", key, withModel(t, body, model), h)
		names, data := sseEvents(out)
		if resp.StatusCode != 200 || len(names) < 4 || names[0] != "message_start" || names[len(names)-1] != "message_stop" {
			t.Errorf("%s: %d %s", model, resp.StatusCode, out)
			continue
		}
		var text strings.Builder
		for _, d := range data {
			var ev struct {
				Delta struct{ Text string } `json:"delta"`
			}
			_ = json.Unmarshal([]byte(d), &ev)
			text.WriteString(ev.Delta.Text)
		}
		// offered tools, every fake starts its weather-bot turn
		if !strings.HasPrefix(text.String(), "Checking.") {
			t.Errorf("%s: streamed text %q", model, text.String())
		}
	}
	// the Anthropic channel got the body as it was sent, betas included;
	// the others got the mid-conversation instruction as instructions
	ant := s.fakes["claude-test"].Requests()
	if len(ant) != 1 || !strings.Contains(ant[0].Header.Get("anthropic-beta"), "mid-conversation-system") {
		t.Errorf("anthropic saw %+v", ant)
	}
	for name, reqs := range map[string][]gatewaytest.Recorded{"gemini": s.fakes["gemini-test"].Requests(), "openai": s.fakes["gpt-test"].Requests()} {
		if len(reqs) != 1 || !strings.Contains(reqs[0].System, "Available agent types for the Agent tool") || len(reqs[0].Tools) != 25 {
			t.Errorf("%s saw system %d bytes, %d tools", name, len(reqs[0].System), len(reqs[0].Tools))
		}
	}
	rows := s.gw.WaitUsage("claude-code", 3)
	for _, r := range rows {
		if r.Status != 200 || r.Cost != costOf(r.Model) || r.Estimated {
			t.Errorf("usage row %+v", r)
		}
	}
}

// TestCodexRequestsEveryFamily: Codex's request with its default tools
// reaches an OpenAI channel unchanged and is refused on the others, naming
// the tool to turn off; with web search and multi-agent tools off it is
// answered by every family.
func TestCodexRequestsEveryFamily(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("codex", 10_000_000)
	for _, model := range []string{"gpt-test", "claude-test", "gemini-test"} {
		resp, out := s.gw.Do("POST", "/v1/responses", key, withModel(t, fixture(t, "codex-default.json"), model), nil)
		switch model {
		case "gpt-test":
			seen := s.fakes["gpt-test"].Requests()
			// as Codex wrote it, plus the reserved allowance as the upstream's
			// limit (Codex sets none; default_max_tokens is 1024)
			want, err := adapters.AppendFields(withModel(t, fixture(t, "codex-default.json"), model),
				adapters.Field{Key: "max_output_tokens", Value: int64(1024)})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || len(seen) != 1 || !bytes.Equal(seen[0].Raw, want) {
				t.Errorf("%s: %d %s", model, resp.StatusCode, out)
			}
		default:
			if resp.StatusCode != 400 || !strings.Contains(string(out), `"namespace\" tool`) && !strings.Contains(string(out), `\"namespace\" tool`) {
				t.Errorf("%s: %d %s", model, resp.StatusCode, out)
			}
		}

		resp, out = s.gw.Do("POST", "/v1/responses", key, withModel(t, fixture(t, "codex.json"), model), nil)
		names, data := sseEvents(out)
		if resp.StatusCode != 200 || len(names) < 3 || names[0] != "response.created" || names[len(names)-1] != "response.completed" {
			t.Errorf("%s: %d %s", model, resp.StatusCode, out)
			continue
		}
		var done struct {
			Response struct {
				Output []struct {
					Type, Name string
				}
				Usage struct {
					InputTokens int64 `json:"input_tokens"`
				}
			}
		}
		if err := json.Unmarshal([]byte(data[len(data)-1]), &done); err != nil || done.Response.Usage.InputTokens == 0 {
			t.Errorf("%s: response.completed %s", model, data[len(data)-1])
		}
	}
}

// geminiCLIConfig maps Gemini CLI's default models, as the README shows:
// its main model to a Claude channel, its routing classifier to an OpenAI
// one.
func geminiCLIConfig() *caddyfile {
	return gatewayConfig().
		channel("claude", "anthropic", "{{ANT}}", "sk-ant-up", "claude-test", "model_map gemini-3.1-pro-preview claude-test").
		channel("gem", "gemini", "{{GEM}}", "AIza-up", "gemini-test").
		channel("gpt", "openai", "{{OAI}}", "sk-oai-up", "gpt-test", "model_map gemini-3.5-flash-lite gpt-test").
		free("claude-test", "gemini-test", "gpt-test", "gemini-3.1-pro-preview", "gemini-3.5-flash-lite")
}

// TestGeminiCLIRequestsEveryFamily: Gemini CLI's routing classifier call
// (JSON output with a schema, topK, thinkingLevel) and its main streamed
// call (tools) answered by every family, under its own model names when
// the operator maps them.
func TestGeminiCLIRequestsEveryFamily(t *testing.T) {
	ant, gem, oai := gatewaytest.NewFakeAnthropic(t, "sk-ant-up"), gatewaytest.NewFakeGemini(t, "AIza-up"), gatewaytest.NewFakeOpenAI(t, "sk-oai-up")
	gw := gatewaytest.Start(t, geminiCLIConfig().String(), gatewaytest.Vars{"ANT": ant.BaseURL(), "GEM": gem.BaseURL(), "OAI": oai.BaseURL()})
	key := gw.AddUser("gemini-cli", 10_000_000)
	h := http.Header{"x-goog-api-key": {key}}
	for _, model := range []string{"gemini-3.1-pro-preview", "gemini-3.5-flash-lite", "claude-test", "gemini-test", "gpt-test"} {
		resp, out := gw.Do("POST", "/v1beta/models/"+model+":generateContent", "", fixture(t, "gemini-cli-router.json"), h)
		if resp.StatusCode != 200 || !strings.Contains(string(out), `"candidates"`) {
			t.Errorf("router call to %s: %d %s", model, resp.StatusCode, out)
		}
		resp, out = gw.Do("POST", "/v1beta/models/"+model+":streamGenerateContent?alt=sse", "", fixture(t, "gemini-cli.json"), h)
		_, data := sseEvents(out)
		if resp.StatusCode != 200 || len(data) == 0 || !strings.Contains(string(out), "Checking.") {
			t.Errorf("main call to %s: %d %s", model, resp.StatusCode, out)
		}
	}
	if n := len(gw.WaitUsage("gemini-cli", 10)); n != 10 {
		t.Errorf("%d usage rows", n)
	}
}

// TestAppFrameworkRequestsEveryFamily: the Vercel AI SDK's default OpenAI
// provider (the Responses API: a streamed first turn, and a second turn
// carrying the function call and its output) and LangChain's ChatOpenAI
// (chat completions, with tools and streamed) answered by every family.
func TestAppFrameworkRequestsEveryFamily(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("frameworks", 10_000_000)
	cases := []struct {
		fixture, path, want string
	}{
		{"ai-sdk.json", "/v1/responses", "Checking."},
		{"ai-sdk-tools.json", "/v1/responses", "Weather: 18C."},
		{"langchain.json", "/v1/chat/completions", "Checking."},
		{"langchain-stream.json", "/v1/chat/completions", "Hello there"},
	}
	for _, c := range cases {
		for _, model := range []string{"claude-test", "gemini-test", "gpt-test"} {
			resp, out := s.gw.Do("POST", c.path, key, withModel(t, fixture(t, c.fixture), model), nil)
			text := string(out)
			if _, data := sseEvents(out); len(data) > 0 {
				var b strings.Builder
				for _, d := range data {
					var ev struct {
						Type    string `json:"type"`
						Delta   any    `json:"delta"`
						Choices []struct {
							Delta struct{ Content string } `json:"delta"`
						} `json:"choices"`
					}
					_ = json.Unmarshal([]byte(d), &ev)
					if s, ok := ev.Delta.(string); ok && ev.Type == "response.output_text.delta" {
						b.WriteString(s)
					}
					for _, ch := range ev.Choices {
						b.WriteString(ch.Delta.Content)
					}
				}
				text = b.String()
			}
			if resp.StatusCode != 200 || !strings.Contains(text, c.want) {
				t.Errorf("%s to %s: %d %s", c.fixture, model, resp.StatusCode, out)
			}
		}
	}
}
