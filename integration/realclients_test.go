package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealClients runs the real Claude Code and Codex CLI against the
// gateway and fake upstreams of each family. It runs when
// GATEWAY_TEST_CLIENTS names the directory where they are installed, as
// `make test` (through `make clients`) and `make test-clients` do.
func TestRealClients(t *testing.T) {
	dir := os.Getenv("GATEWAY_TEST_CLIENTS")
	if dir == "" {
		t.Skip("GATEWAY_TEST_CLIENTS is not set: `make clients` installs Claude Code and Codex, and `make test` runs this test with them")
	}
	bin := func(name string) string {
		p := filepath.Join(dir, "node_modules", ".bin", name)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is not installed in %s: %v", name, dir, err)
		}
		return p
	}
	s := startResponses(t)
	key := s.gw.AddUser("real-clients", 10_000_000)
	run := func(t *testing.T, env []string, name string, args ...string) string {
		t.Helper()
		// a safety net for a client that hangs, not an assertion on time
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		home := t.TempDir()
		cmd.Dir = home
		cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DISABLE_AUTOUPDATER=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
		}
		return string(out)
	}
	// Offered tools, every fake calls get_weather, which neither program
	// has: each answers the call with an error and the fake then reports
	// that result, so a whole tool round trip goes through the gateway.
	codexConfig := func(model, extra string) string {
		return `model = "` + model + `"
model_provider = "gateway"
web_search = "disabled"
[features]
multi_agent = false
[model_providers.gateway]
name = "gateway"
base_url = "` + s.gw.URL + `/v1"
env_key = "GATEWAY_API_KEY"
wire_api = "responses"
` + extra
	}
	codex := func(t *testing.T, config string) string {
		codexHome := t.TempDir()
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		return run(t, []string{"CODEX_HOME=" + codexHome, "GATEWAY_API_KEY=" + key},
			bin("codex"), "exec", "--skip-git-repo-check", "What is the weather in Paris and Rome?")
	}
	for _, model := range []string{"gpt-test", "claude-test", "gemini-test"} {
		t.Run("claude "+model, func(t *testing.T) {
			out := run(t, []string{"ANTHROPIC_BASE_URL=" + s.gw.URL, "ANTHROPIC_API_KEY=" + key},
				bin("claude"), "-p", "What is the weather in Paris and Rome?", "--model", model)
			if !strings.Contains(out, "Weather:") {
				t.Errorf("claude -p said %q", out)
			}
		})
		t.Run("codex "+model, func(t *testing.T) {
			if out := codex(t, codexConfig(model, "")); !strings.Contains(out, "Weather:") {
				t.Errorf("codex exec said %q", out)
			}
		})
	}
	// a provider that offers WebSockets: Codex tries GET /v1/responses as
	// a socket, gets 426, and posts the turn
	t.Run("codex websocket first", func(t *testing.T) {
		if out := codex(t, codexConfig("claude-test", "supports_websockets = true\n")); !strings.Contains(out, "Weather:") {
			t.Errorf("codex exec said %q", out)
		}
	})
	for _, r := range s.gw.WaitUsage("real-clients", 14) {
		if r.Status != 200 {
			t.Errorf("usage row %+v", r)
		}
	}

	// prompt-cache affinity: a session's turns (the tool round trip) stay
	// on one key of a channel of four, on a gateway of its own
	kgw, claudeKeys, gptKeys := startKeyedClients(t)
	kkey := kgw.AddUser("keyed-clients", 10_000_000)
	for _, name := range []string{"claude", "codex"} {
		t.Run(name+" stays on one key", func(t *testing.T) {
			rec, from := claudeKeys, len(claudeKeys.keys(0))
			if name == "codex" {
				rec, from = gptKeys, len(gptKeys.keys(0))
			}
			for range 2 { // two sessions
				n := len(rec.keys(0))
				var out string
				if name == "claude" {
					out = run(t, []string{"ANTHROPIC_BASE_URL=" + kgw.URL, "ANTHROPIC_API_KEY=" + kkey},
						bin("claude"), "-p", "What is the weather in Paris and Rome?", "--model", "claude-test")
				} else {
					codexHome := t.TempDir()
					config := strings.Replace(codexConfig("gpt-test", ""), s.gw.URL, kgw.URL, 1)
					if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
						t.Fatal(err)
					}
					out = run(t, []string{"CODEX_HOME=" + codexHome, "GATEWAY_API_KEY=" + kkey},
						bin("codex"), "exec", "--skip-git-repo-check", "What is the weather in Paris and Rome?")
				}
				if !strings.Contains(out, "Weather:") {
					t.Fatalf("%s said %q", name, out)
				}
				if keys := rec.keys(n); len(keys) < 2 || distinct(keys) != 1 {
					t.Errorf("%s's session went to keys %v, want its turns on one", name, keys)
				}
			}
			t.Logf("%s's two sessions used keys %v", name, rec.keys(from))
		})
	}
}
