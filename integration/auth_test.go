package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

func tokenID(t *testing.T, gw *gatewaytest.Gateway, user, name string) int64 {
	var tokens []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(gw.CLI("token", "list", "--username", user)), &tokens); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tokens {
		if tk.Name == name {
			return tk.ID
		}
	}
	t.Fatalf("no token %q for %s", name, user)
	return 0
}

func TestAuthFailures(t *testing.T) {
	s := startOpenAI(t)
	ctx := context.Background()
	key := s.gw.AddUser("alice", 1_000_000, "--name", "main")
	params := chatParams("gpt-4o-mini", "hi")

	t.Run("no key", func(t *testing.T) {
		resp, body := s.gw.Do(http.MethodPost, "/v1/chat/completions", "", []byte(`{"model":"gpt-4o-mini"}`), nil)
		e, ok := errorBody(body)
		if resp.StatusCode != 401 || !ok || e.Code != "missing_api_key" || e.Type == "" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		_, err := s.client("sk-not-a-real-key", option.WithMaxRetries(0)).Chat.Completions.New(ctx, params)
		apiError(t, err, 401, "invalid_api_key")
	})
	t.Run("disabled token takes effect within seconds", func(t *testing.T) {
		client := s.client(key, option.WithMaxRetries(0))
		if _, err := client.Chat.Completions.New(ctx, params); err != nil {
			t.Fatal(err)
		}
		s.gw.CLI("token", "disable", "--id", fmt.Sprint(tokenID(t, s.gw, "alice", "main")))
		var err error
		within(t, 10*time.Second, "a disabled token to stop working", func() bool {
			_, err = client.Chat.Completions.New(ctx, params)
			return err != nil
		})
		apiError(t, err, 401, "token_disabled")
	})
	t.Run("expired token", func(t *testing.T) {
		short := s.gw.AddToken("alice", "--expires", "1s")
		time.Sleep(1100 * time.Millisecond)
		_, err := s.client(short, option.WithMaxRetries(0)).Chat.Completions.New(ctx, params)
		apiError(t, err, 401, "token_expired")
	})
	t.Run("model outside the allow-list", func(t *testing.T) {
		narrow := s.gw.AddToken("alice", "--models", "text-embedding-3-small")
		_, err := s.client(narrow, option.WithMaxRetries(0)).Chat.Completions.New(ctx, params)
		apiError(t, err, 403, "model_not_allowed")
	})
}

func TestQuotaExhaustedIsNotRetried(t *testing.T) {
	s := startOpenAI(t)
	ctx := context.Background()
	broke := s.gw.AddUser("broke", 0)
	var calls atomic.Int32
	count := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		calls.Add(1)
		return next(r)
	})
	// default retries left on: the SDK must still not retry
	_, err := s.client(broke, count).Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi"))
	e := apiError(t, err, 429, "insufficient_quota")
	if e.Response.Header.Get("X-Should-Retry") != "false" {
		t.Fatal("429 without x-should-retry: false")
	}
	if calls.Load() != 1 {
		t.Fatalf("the SDK sent %d requests for a quota 429, want 1", calls.Load())
	}
	if len(s.primary.Requests()) != 0 {
		t.Fatal("a request without quota reached the upstream")
	}

	// a token's own limit: the first request fits, then the limit is spent
	s.gw.AddUser("capped", 1_000_000)
	capped := s.gw.AddToken("capped", "--quota", "700")
	client := s.client(capped, option.WithMaxRetries(0))
	p := chatParams("gpt-4o-mini", "hi")
	p.MaxTokens = openai.Int(100) // reserves under 700 units
	if _, err := client.Chat.Completions.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.primary.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens = 1000, 1000 }) // 750 units
	if _, err := client.Chat.Completions.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	_, err = client.Chat.Completions.New(ctx, p)
	apiError(t, err, 429, "insufficient_quota")
}

func TestBadInputCostsNothing(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("eve", 1_000_000)
	tests := []struct {
		name, path, body string
		status           int
		want             string // in the message
	}{
		{"invalid JSON", "/v1/chat/completions", `{"model":`, 400, "not valid JSON"},
		{"empty body", "/v1/chat/completions", ``, 400, "empty"},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "'model' is required"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "does not exist"},
		{"wrong type", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":"hi"}`, 400, "messages"},
		{"wrong role", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"robot","content":"hi"}]}`, 400, "role"},
		{"no messages", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 400, "messages"},
		{"unpriced model", "/v1/chat/completions", `{"model":"unpriced-model","messages":[{"role":"user","content":"hi"}]}`, 400, "no price"},
		{"too large", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`, 413, "larger than"},
		{"bad embedding input", "/v1/embeddings", `{"model":"text-embedding-3-small","input":{"a":1}}`, 400, "input"},
		{"bad encoding", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"a","encoding_format":"int8"}`, 400, "encoding_format"},
		{"unknown path", "/v1/nothing-here", `{}`, 404, "unknown endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.gw.Do(http.MethodPost, tt.path, key, []byte(tt.body), nil)
			e, ok := errorBody(body)
			if !ok || e.Type == "" {
				t.Fatalf("%d: body is not an OpenAI error: %s", resp.StatusCode, body)
			}
			if resp.StatusCode != tt.status || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %d %q, want %d and %q", resp.StatusCode, e.Message, tt.status, tt.want)
			}
		})
	}
	if n := len(s.primary.Requests()) + len(s.backup.Requests()); n != 0 {
		t.Fatalf("%d bad requests reached an upstream", n)
	}
	if quota, used := s.gw.Quota("eve"); quota != 1_000_000 || used != 0 {
		t.Fatalf("bad input cost something: quota %d used %d", quota, used)
	}
	// each refused request is still logged, at no cost (the unknown path
	// never reaches the relay's model handling)
	rows := s.gw.WaitUsage("eve", len(tests)-1)
	for i, r := range rows {
		if r.Cost != 0 || r.Status != tests[i].status || r.Error == "" {
			t.Fatalf("row %d = %+v, want a free row with status %d", i, r, tests[i].status)
		}
	}
}

func TestKeysNeverReachTheLog(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("quiet", 1_000_000)
	s.gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), nil)
	s.gw.Do(http.MethodGet, "/v1/models", "", nil, http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}})
	s.gw.Do(http.MethodPost, "/v1beta/models/gpt-4o-mini:generateContent?key="+key, "", []byte(`{}`), http.Header{"X-Goog-Api-Key": {key}})
	s.gw.Do(http.MethodPost, "/v1/chat/completions", "sk-wrong-"+key[3:], []byte(`{}`), nil)
	time.Sleep(300 * time.Millisecond)
	logs := s.gw.Logs()
	if !strings.Contains(logs, `"uri":"/v1/models"`) && !strings.Contains(logs, "/v1/chat/completions") {
		t.Fatalf("no access log lines to check:\n%s", logs)
	}
	if strings.Contains(logs, key[3:]) {
		t.Fatalf("a key reached the log:\n%s", logs)
	}
	// who made the request is in the access log and in placeholders
	if !strings.Contains(logs, `"gateway_user":"quiet"`) {
		t.Fatalf("no gateway_user field in the access log:\n%s", logs)
	}
	resp, _ := s.gw.Do(http.MethodGet, "/v1/models", key, nil, nil)
	if resp.Header.Get("X-Gateway-User") != "quiet" {
		t.Fatalf("{http.vars.gateway.username} = %q", resp.Header.Get("X-Gateway-User"))
	}
}

// TestKeyLocationsAndErrorDialects: Anthropic clients put the key in
// x-api-key, Gemini clients in ?key= or x-goog-api-key; failures answer in
// each caller's own error shape.
func TestKeyLocationsAndErrorDialects(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("kim", 1_000_000)
	anthropicBody := []byte(`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	geminiBody := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	av := http.Header{"Anthropic-Version": {"2023-06-01"}}

	tests := []struct {
		name, path string
		header     http.Header
		body       []byte
		status     int
		shape      string // a fragment of the body
	}{
		{"x-api-key", "/v1/messages", http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}}, anthropicBody, 200, `"type":"message"`},
		{"anthropic bad key", "/v1/messages", http.Header{"X-Api-Key": {"sk-bad"}, "Anthropic-Version": {"2023-06-01"}}, anthropicBody, 401, `"type":"error"`},
		{"anthropic no key", "/v1/messages", av, anthropicBody, 401, `"authentication_error"`},
		{"gemini ?key=", "/v1beta/models/gpt-4o-mini:generateContent?key=" + key, nil, geminiBody, 200, `"candidates"`},
		{"gemini x-goog-api-key", "/v1beta/models/gpt-4o-mini:generateContent", http.Header{"X-Goog-Api-Key": {key}}, geminiBody, 200, `"candidates"`},
		{"gemini bad key", "/v1beta/models/gpt-4o-mini:generateContent?key=sk-bad", nil, geminiBody, 401, `"status":"UNAUTHENTICATED"`},
		{"gemini v1 path", "/v1/models/gpt-4o-mini:generateContent?key=" + key, nil, geminiBody, 200, `"candidates"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.gw.Do(http.MethodPost, tt.path, "", tt.body, tt.header)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.shape) {
				t.Fatalf("got %d %s, want %d with %s", resp.StatusCode, body, tt.status, tt.shape)
			}
		})
	}
	if rows := s.gw.WaitUsage("kim", 4); len(rows) != 4 {
		t.Fatalf("rows = %+v", rows)
	}
}
