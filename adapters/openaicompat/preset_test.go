package openaicompat

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func load(t *testing.T, name string) *Adapter {
	t.Helper()
	for _, p := range presets {
		if p.name == name {
			return &Adapter{preset: p}
		}
	}
	t.Fatalf("no preset %s", name)
	return nil
}

// Each vendor's chat path, from its default address or a base_url written
// as its docs give it (with part or all of its API root).
func TestPresetURLs(t *testing.T) {
	cases := []struct{ preset, base, want string }{
		{"deepseek", "", "https://api.deepseek.com/chat/completions"},
		{"deepseek", "https://api.deepseek.com/v1", "https://api.deepseek.com/v1/chat/completions"},
		{"qwen", "", "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"},
		{"qwen", "https://dashscope-intl.aliyuncs.com/compatible-mode", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions"},
		{"qwen", "https://dashscope.aliyuncs.com/compatible-mode/v1/", "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"},
		{"zhipu", "", "https://open.bigmodel.cn/api/paas/v4/chat/completions"},
		{"zhipu", "https://open.bigmodel.cn/api/paas/v4", "https://open.bigmodel.cn/api/paas/v4/chat/completions"},
		{"zhipu", "https://api.z.ai/api/paas/v4", "https://api.z.ai/api/paas/v4/chat/completions"},
		{"doubao", "", "https://ark.cn-beijing.volces.com/api/v3/chat/completions"},
		{"openrouter", "https://openrouter.ai/api", "https://openrouter.ai/api/v1/chat/completions"},
		{"moonshot", "https://api.moonshot.cn", "https://api.moonshot.cn/v1/chat/completions"},
		{"mistral", "", "https://api.mistral.ai/v1/chat/completions"},
		{"ollama", "", "http://localhost:11434/v1/chat/completions"},
		{"vllm", "http://gpu-1:8000", "http://gpu-1:8000/v1/chat/completions"},
		{"lmstudio", "", "http://localhost:1234/v1/chat/completions"},
	}
	for _, c := range cases {
		a := load(t, c.preset)
		base := c.base
		if base == "" {
			base = a.DefaultBaseURL()
		}
		req := &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Model: "m", Raw: []byte(`{"model":"m","messages":[]}`), Chat: &adapters.ChatRequest{}}
		hr, err := a.NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: base, Key: "sk-vendor", Model: "m"}, req)
		if err != nil {
			t.Fatalf("%s: %v", c.preset, err)
		}
		if got := hr.URL.String(); got != c.want {
			t.Errorf("%s %q: %s, want %s", c.preset, c.base, got, c.want)
		}
		if hr.Header.Get("Authorization") != "Bearer sk-vendor" {
			t.Errorf("%s: Authorization %q", c.preset, hr.Header.Get("Authorization"))
		}
	}
}

// An operation the vendor does not serve is refused before any call.
func TestPresetRefusesOperations(t *testing.T) {
	_, err := load(t, "deepseek").NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: "https://x"}, &adapters.Request{Op: adapters.OpEmbedding, Dialect: "openai", Raw: []byte(`{}`)})
	if e, ok := err.(*adapters.Error); !ok || e.Status != 400 || !strings.Contains(e.Message, "embedding") {
		t.Errorf("got %v", err)
	}
}

// stream_options off: a server that refuses the member is not sent it.
func TestPresetStreamOptionsOff(t *testing.T) {
	a := load(t, "vllm")
	d := caddyfile.NewTestDispenser("vllm {\n stream_options off\n}")
	if err := a.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Model: "m", Stream: true, Raw: []byte(`{"model":"m","stream":true,"messages":[]}`), Chat: &adapters.ChatRequest{}}
	hr, err := a.NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: "http://x", Model: "m"}, req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	if strings.Contains(string(body), "stream_options") {
		t.Errorf("sent %s", body)
	}
	if err := load(t, "vllm").UnmarshalCaddyfile(caddyfile.NewTestDispenser("vllm {\n stream_usage off\n}")); err == nil {
		t.Error("an unknown option was accepted")
	}
}

// A passthrough body that could cost more than the model's price is named,
// so the relay refuses it unless the channel allows the field.
func TestPresetPricedFields(t *testing.T) {
	cases := []struct {
		preset, body string
		want         string
	}{
		{"openrouter", `{"model":"m","messages":[],"plugins":[{"id":"web"}]}`, "plugins"},
		{"openrouter", `{"model":"m","messages":[],"models":["openai/gpt-5","anthropic/claude-opus-4"]}`, "models"},
		{"openrouter", `{"model":"m","messages":[],"models":null}`, ""},
		{"openrouter", `{"model":"m","messages":[],"web_search_options":{}}`, "web_search_options"},
		{"doubao", `{"model":"m","messages":[],"service_tier":"priority"}`, "service_tier"},
		{"deepseek", `{"model":"m","messages":[],"plugins":[{"id":"web"}]}`, ""},
	}
	for _, c := range cases {
		fields, _ := load(t, c.preset).PricedFields(&adapters.Request{Op: adapters.OpChat, Dialect: "openai", Raw: []byte(c.body)})
		if got := strings.Join(fields, ","); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.preset, c.body, got, c.want)
		}
	}
}

// OpenRouter's failure after the stream began ends it with the error
// whatever the chunk's spacing (Python's json.dumps writes ": "), and a
// finish reason that only contains the word is no failure.
func TestErrorFinishSpaced(t *testing.T) {
	a := load(t, "openrouter")
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Model: "m", Stream: true, Chat: &adapters.ChatRequest{}}
	for _, tc := range []struct {
		data   string
		failed bool
	}{
		{`{"id":"x","error":{"code":502,"message":"Provider disconnected"},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}`, true},
		{`{"id": "x", "error": {"code": 502, "message": "Provider disconnected"}, "choices": [{"delta": {"content": ""}, "finish_reason" : "error"}]}`, true},
		// the finish reason alone, spaced: the chunk names no error member
		{`{"id": "x", "choices": [{"delta": {}, "finish_reason" : "error"}]}`, true},
		{`{"id": "x", "choices": [{"delta": {"content": "an error"}, "finish_reason": "stop"}]}`, false},
	} {
		_, _, err := a.NewStreamStep(req).Probe(&adapters.SSEEvent{Data: []byte(tc.data)})
		if (err != nil) != tc.failed {
			t.Errorf("%s: error %v, want failed=%v", tc.data, err, tc.failed)
		}
	}
}
