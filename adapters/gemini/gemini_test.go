package gemini_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		op           adapters.Operation
		ok           bool
	}{
		{"GET", "/v1beta/models", adapters.OpListModels, true},
		{"GET", "/v1beta/models/gemini-2.5-flash", adapters.OpGetModel, true},
		{"POST", "/v1beta/models/gemini-2.5-flash:generateContent", adapters.OpChat, true},
		{"POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", adapters.OpChat, true},
		{"POST", "/v1beta/models/gemini-2.5-flash:countTokens", adapters.OpCountTokens, true},
		{"POST", "/v1beta/models/text-embedding-004:embedContent", adapters.OpUnknown, true},
		{"GET", "/v1beta/models/gemini-2.5-flash:generateContent", adapters.OpUnknown, true},
		{"POST", "/v1beta/models", adapters.OpUnknown, true},
		{"GET", "/v1beta/files", adapters.OpUnknown, true},
		{"POST", "/v1beta/cachedContents", adapters.OpUnknown, true},
		{"POST", "/v1/models/gemini-2.5-flash:generateContent", adapters.OpChat, true},
		{"POST", "/v1/models/gemini-2.5-flash:streamGenerateContent", adapters.OpChat, true},
		{"POST", "/v1/models/gemini-2.5-flash:countTokens", adapters.OpCountTokens, true},
		{"POST", "/v1/models/x:unknownMethod", adapters.OpUnknown, true},
		{"GET", "/v1/models/gemini-2.5-flash:generateContent", adapters.OpUnknown, true},
		{"GET", "/v1/models", "", false},
		{"GET", "/v1/models/gpt-4o", "", false},
		{"GET", "/v1/models/ft:gpt-4o-mini-2024-07-18:org::abc123", "", false},
		{"POST", "/v1/chat/completions", "", false},
		{"POST", "/v1/messages", "", false},
	}
	for _, tt := range tests {
		op, ok := gem.Route(httptest.NewRequest(tt.method, tt.path, nil))
		if op != tt.op || ok != tt.ok {
			t.Errorf("%s %s: got %q %v, want %q %v", tt.method, tt.path, op, ok, tt.op, tt.ok)
		}
	}
}

func TestCredential(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1beta/models/g:generateContent?key=sk-q", nil)
	r.Header.Set("x-goog-api-key", "sk-h")
	r.Header.Set("Authorization", "Bearer sk-b")
	if got := gem.Credential(r); got != "sk-q" {
		t.Errorf("?key=: %q", got)
	}
	r = httptest.NewRequest("POST", "/v1beta/models/g:generateContent", nil)
	r.Header.Set("x-goog-api-key", "sk-h")
	r.Header.Set("Authorization", "Bearer sk-b")
	if got := gem.Credential(r); got != "sk-h" {
		t.Errorf("x-goog-api-key: %q", got)
	}
	r.Header.Del("x-goog-api-key")
	if got := gem.Credential(r); got != "sk-b" {
		t.Errorf("bearer: %q", got)
	}
}

// countTokens takes bare contents or a whole generateContentRequest. (What
// the dialect refuses is in the conformance suite's refusal table.)
func TestCountTokensRequest(t *testing.T) {
	for _, body := range []string{`{"contents":[{"parts":[{"text":"hi"}]}]}`, `{"generateContentRequest":{"model":"models/g","contents":[{"parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}}`} {
		req, err := gem.DecodeRequest(adapters.OpCountTokens, []byte(body), post("/v1beta/models/models/g:countTokens"))
		if err != nil || req.Chat == nil || req.Model != "g" || req.Stream {
			t.Errorf("count %s: %v %+v", body, err, req)
		}
	}
}

// A part of a kind the gateway does not know passes through to Gemini (the
// refusal table has it refused on the way to other families); an empty
// part is skipped.
func TestUnknownParts(t *testing.T) {
	body := `{"contents":[{"parts":[{"text":"hi"}]},{"role":"model","parts":[{"toolCall":{"id":"t"}},{}]},{"parts":[{"text":"more"}]}]}`
	if _, err := gem.DecodeRequest(adapters.OpChat, []byte(body), post("/v1beta/models/g:generateContent")); err != nil {
		t.Fatal(err)
	}
	body = `{"contents":[{"parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"a"},{}]},{"parts":[{"text":"more"}]}]}`
	req, err := gem.DecodeRequest(adapters.OpChat, []byte(body), post("/v1beta/models/g:generateContent"))
	if err != nil || len(req.Chat.Messages[1].Parts) != 1 {
		t.Fatalf("empty part: %v %+v", err, req)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		in   adapters.Error
		want string
	}{
		{adapters.Error{Status: 400, Message: "bad"}, `{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`},
		{adapters.Error{Status: 401, Message: "no key"}, `{"error":{"code":401,"message":"no key","status":"UNAUTHENTICATED"}}`},
		{adapters.Error{Status: 403, Message: "no"}, `{"error":{"code":403,"message":"no","status":"PERMISSION_DENIED"}}`},
		{adapters.Error{Status: 404, Message: "?"}, `{"error":{"code":404,"message":"?","status":"NOT_FOUND"}}`},
		{adapters.Error{Status: 429, Message: "quota"}, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`},
		{adapters.Error{Status: 500, Message: "oops"}, `{"error":{"code":500,"message":"oops","status":"INTERNAL"}}`},
		{adapters.Error{Status: 503, Message: "busy"}, `{"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}}`},
		{adapters.Error{Status: 504, Message: "slow"}, `{"error":{"code":504,"message":"slow","status":"DEADLINE_EXCEEDED"}}`},
	}
	for _, tt := range tests {
		if got := string(gem.EncodeError(&tt.in)); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
	p := prov
	e := p.DecodeError(400, []byte(`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`))
	if e.Status != 400 || e.Type != "authentication_error" || !strings.Contains(e.Message, "API key") {
		t.Errorf("bad key: %+v", e)
	}
	e = p.DecodeError(429, []byte(`[{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}]`))
	if e.Status != 429 || e.Type != "rate_limit_error" || e.Message != "Resource has been exhausted" {
		t.Errorf("array: %+v", e)
	}
	e = p.DecodeError(500, []byte(`oops`))
	if e.Status != 500 || e.Message == "" {
		t.Errorf("text: %+v", e)
	}
	out := gem.NewStreamEncoder(&adapters.Request{}).Error(nil, &adapters.Error{Status: 502, Message: "upstream broke"})
	if string(out) != "data: {\"error\":{\"code\":502,\"message\":\"upstream broke\",\"status\":\"UNAVAILABLE\"}}\n\n" {
		t.Errorf("stream error %q", out)
	}
}

func TestModels(t *testing.T) {
	got := string(gem.EncodeModels([]adapters.ModelInfo{{ID: "gemini-2.5-flash"}}))
	want := `{"models":[{"name":"models/gemini-2.5-flash","baseModelId":"gemini-2.5-flash","displayName":"gemini-2.5-flash","supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}]}`
	if got != want {
		t.Errorf("models:\n%s\n%s", got, want)
	}
	if got := string(gem.EncodeModels(nil)); got != `{"models":[]}` {
		t.Errorf("empty: %s", got)
	}
	if got := string(gemini.Adapter{}.EncodeTokenCount(9)); got != `{"totalTokens":9}` {
		t.Errorf("count: %s", got)
	}
	r := httptest.NewRequest(http.MethodGet, "/v1beta/models/gemini-2.5-flash", nil)
	req, err := gem.DecodeRequest(adapters.OpGetModel, nil, r)
	if err != nil || req.Model != "gemini-2.5-flash" {
		t.Errorf("get model: %v %+v", err, req)
	}
	if got := string(gemini.Adapter{}.EncodeModel(adapters.ModelInfo{ID: "x"})); !strings.HasPrefix(got, `{"name":"models/x"`) {
		t.Errorf("model: %s", got)
	}
}
