package anthropic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		header       string // anthropic-version
		op           adapters.Operation
		ok           bool
	}{
		{"POST", "/v1/messages", "", adapters.OpChat, true},
		{"POST", "/v1/messages/count_tokens", "", adapters.OpCountTokens, true},
		{"GET", "/v1/messages", "", adapters.OpUnknown, true},
		{"POST", "/v1/messages/batches", "", adapters.OpUnknown, true},
		{"GET", "/v1/models", "2023-06-01", adapters.OpListModels, true},
		{"GET", "/v1/models/claude-sonnet-4-5", "2023-06-01", adapters.OpGetModel, true},
		{"GET", "/v1/models", "", "", false},
		{"GET", "/v1/models/gpt-4o", "", "", false},
		{"POST", "/v1/chat/completions", "2023-06-01", "", false},
		{"POST", "/v1beta/models/x:generateContent", "", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if tt.header != "" {
			r.Header.Set("anthropic-version", tt.header)
		}
		op, ok := ant.Route(r)
		if op != tt.op || ok != tt.ok {
			t.Errorf("%s %s (%q): got %q %v, want %q %v", tt.method, tt.path, tt.header, op, ok, tt.op, tt.ok)
		}
	}
}

func TestCredential(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/messages", nil)
	r.Header.Set("x-api-key", "sk-a")
	r.Header.Set("Authorization", "Bearer sk-b")
	if got := ant.Credential(r); got != "sk-a" {
		t.Errorf("x-api-key: %q", got)
	}
	r.Header.Del("x-api-key")
	if got := ant.Credential(r); got != "sk-b" {
		t.Errorf("bearer: %q", got)
	}
	r.Header.Del("Authorization")
	if got := ant.Credential(r); got != "" {
		t.Errorf("none: %q", got)
	}
}

// count_tokens takes no max_tokens; any version value is accepted. (What
// the dialect refuses is in the conformance suite's refusal table.)
func TestCountTokensRequest(t *testing.T) {
	r := post("/v1/messages/count_tokens", "anthropic-version", "2099-12-31")
	req, err := ant.DecodeRequest(adapters.OpCountTokens, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), r)
	if err != nil || req.Chat == nil || req.Model != "m" {
		t.Fatalf("count_tokens: %v", err)
	}
}

// Anthropic clients keep their signed thinking; other vendors' reasoning is
// left out of a request to Anthropic.
func TestThinkingSignatures(t *testing.T) {
	chat := &adapters.ChatRequest{Messages: []adapters.Message{
		{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "q"}}},
		{Role: adapters.RoleAssistant, Parts: []adapters.Part{
			{Type: adapters.PartThinking, Text: "mine", Signature: "anthropic:SIG"},
			{Type: adapters.PartThinking, Text: "gemini's", Signature: "gemini:R0VN"},
			{Type: adapters.PartThinking, Text: "unsigned"},
			{Type: adapters.PartThinking, Redacted: "REDACTED"},
			{Type: adapters.PartText, Text: "a"},
		}},
	}}
	body, err := anthropic.EncodeChatRequest(&adapters.Request{Op: adapters.OpChat, Dialect: "gemini", Chat: chat}, "claude")
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	got := w.Messages[1].Content
	if len(got) != 3 || got[0]["signature"] != "SIG" || got[1]["type"] != "redacted_thinking" || got[2]["text"] != "a" {
		t.Errorf("assistant content %v", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		in   adapters.Error
		want string
	}{
		{adapters.Error{Status: 400, Type: "invalid_request_error", Message: "bad"}, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`},
		{adapters.Error{Status: 401, Message: "no key"}, `{"type":"error","error":{"type":"authentication_error","message":"no key"}}`},
		{adapters.Error{Status: 429, Type: "insufficient_quota", Message: "quota"}, `{"type":"error","error":{"type":"rate_limit_error","message":"quota"}}`},
		{adapters.Error{Status: 502, Message: "upstream"}, `{"type":"error","error":{"type":"api_error","message":"upstream"}}`},
		{adapters.Error{Status: 503, Message: "busy"}, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
		{adapters.Error{Status: 413, Message: "big"}, `{"type":"error","error":{"type":"request_too_large","message":"big"}}`},
	}
	for _, tt := range tests {
		if got := string(ant.EncodeError(&tt.in)); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
	e := prov.DecodeError(529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`))
	if e.Status != 529 || e.Type != "overloaded_error" || e.Message != "Overloaded" {
		t.Errorf("decode: %+v", e)
	}
	e = prov.DecodeError(402, []byte(`{"type":"error","error":{"type":"billing_error","message":"pay"}}`))
	if e.Status != 402 || e.Message != "pay" || e.Type == "billing_error" {
		t.Errorf("billing: %+v", e)
	}
	e = prov.DecodeError(502, []byte(`<html>bad gateway</html>`))
	if e.Status != 502 || e.Message == "" {
		t.Errorf("html: %+v", e)
	}
	// in a stream
	var out []byte
	out = ant.NewStreamEncoder(&adapters.Request{}).Error(out, &adapters.Error{Status: 429, Type: "rate_limit_error", Message: "slow down"})
	if string(out) != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n" {
		t.Errorf("stream error %q", out)
	}
}

func TestModels(t *testing.T) {
	models := []adapters.ModelInfo{{ID: "claude-a", Created: 1735689600}, {ID: "gpt-b"}}
	got := string(ant.EncodeModels(models))
	want := `{"data":[{"type":"model","id":"claude-a","display_name":"claude-a","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"gpt-b","display_name":"gpt-b","created_at":"1970-01-01T00:00:00Z"}],"has_more":false,"first_id":"claude-a","last_id":"gpt-b"}`
	if got != want {
		t.Errorf("models:\n%s\n%s", got, want)
	}
	if got := string(ant.EncodeModels(nil)); got != `{"data":[],"has_more":false,"first_id":null,"last_id":null}` {
		t.Errorf("empty: %s", got)
	}
	if got := string(anthropic.Adapter{}.EncodeModel(models[0])); got != `{"type":"model","id":"claude-a","display_name":"claude-a","created_at":"2025-01-01T00:00:00Z"}` {
		t.Errorf("model: %s", got)
	}
	if got := string(anthropic.Adapter{}.EncodeTokenCount(42)); got != `{"input_tokens":42}` {
		t.Errorf("count: %s", got)
	}
	// GET /v1/models/{id} decodes the id
	r := httptest.NewRequest(http.MethodGet, "/v1/models/claude-a", nil)
	req, err := ant.DecodeRequest(adapters.OpGetModel, nil, r)
	if err != nil || req.Model != "claude-a" {
		t.Errorf("get model: %v %+v", err, req)
	}
}

// A count translated to an Anthropic channel (as a Gemini client asks
// for one), and its answer in neutral form.
func TestCountTokensTranslated(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpCountTokens, Dialect: "translated", Model: "claude-x", Chat: &adapters.ChatRequest{
		Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "hi"}}}},
	}}
	hr, err := prov.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://api.anthropic.com", Model: "claude-x"}, req)
	if err != nil || hr.URL.Path != "/v1/messages/count_tokens" {
		t.Fatalf("%v %v", err, hr)
	}
	resp, err := prov.DecodeResponse(req, []byte(`{"input_tokens":17}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Raw != nil || resp.Usage.PromptTokens != 17 {
		t.Errorf("count answer %+v", resp)
	}
}
