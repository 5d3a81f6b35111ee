package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestCodingAgentsReachTheClouds: the captured first requests of Claude
// Code (Messages: adaptive thinking, 25 tools), Codex (Responses, with the
// tools the README says to turn off turned off) and Gemini CLI (its
// streamed main call, with tools) reach a Claude and a Nova model on
// Bedrock and Gemini and Claude on Vertex, each answered as a stream in
// the agent's own dialect and billed on the upstream's own counts.
func TestCodingAgentsReachTheClouds(t *testing.T) {
	br := startBedrock(t, bedrockConfig())
	vx := startVertex(t)
	var hdr map[string]string
	if err := json.Unmarshal(fixture(t, "claude-code.headers.json"), &hdr); err != nil {
		t.Fatal(err)
	}
	claudeHeader := http.Header{}
	for k, v := range hdr {
		claudeHeader.Set(k, v)
	}
	agents := []struct {
		name, fixture string
		call          func(gw *gatewaytest.Gateway, key, model string, body []byte) (*http.Response, []byte)
		first, last   string
	}{
		{"claude-code", "claude-code.json", func(gw *gatewaytest.Gateway, key, model string, body []byte) (*http.Response, []byte) {
			return gw.Do("POST", "/v1/messages", key, withModel(t, body, model), claudeHeader)
		}, "message_start", "message_stop"},
		{"codex", "codex.json", func(gw *gatewaytest.Gateway, key, model string, body []byte) (*http.Response, []byte) {
			return gw.Do("POST", "/v1/responses", key, withModel(t, body, model), nil)
		}, "response.created", "response.completed"},
		{"gemini-cli", "gemini-cli.json", func(gw *gatewaytest.Gateway, key, model string, body []byte) (*http.Response, []byte) {
			return gw.Do("POST", "/v1beta/models/"+model+":streamGenerateContent?alt=sse", "", body, http.Header{"x-goog-api-key": {key}})
		}, "", ""},
	}
	targets := []struct {
		gw    *gatewaytest.Gateway
		model string
		cost  int64 // 30 fresh + 5 cached prompt tokens, 12 out, at the model's price
	}{
		{br.gw, bedrockClaudeN, 73},
		{br.gw, bedrockNova, 5},
		{vx.gw, vertexGemini, 40},
		{vx.gw, vertexClaude, 272},
	}
	for _, a := range agents {
		for _, tg := range targets {
			t.Run(a.name+" to "+tg.model, func(t *testing.T) {
				user := strings.NewReplacer(".", "-", ":", "-").Replace(a.name + "-" + tg.model)
				key := tg.gw.AddUser(user, 10_000_000)
				resp, out := a.call(tg.gw, key, tg.model, fixture(t, a.fixture))
				names, _ := sseEvents(out)
				if resp.StatusCode != 200 || len(names) == 0 || names[0] != a.first || names[len(names)-1] != a.last {
					t.Fatalf("%d %s", resp.StatusCode, out)
				}
				// offered tools, every fake starts its weather-bot turn
				if !strings.Contains(string(out), "Checking.") {
					t.Errorf("no tool turn in %s", out)
				}
				rows := tg.gw.WaitUsage(user, 1)
				if r := rows[0]; r.Status != 200 || r.Estimated || r.Cost != tg.cost {
					t.Errorf("usage row %+v, want %d units on the upstream's counts", r, tg.cost)
				}
				if _, used := tg.gw.Quota(user); used != rows[0].Cost {
					t.Errorf("used %d, the row cost %d", used, rows[0].Cost)
				}
			})
		}
	}
}
