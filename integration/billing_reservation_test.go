package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// recorder is an upstream of any of the three families that answers a
// minimal non-streamed reply and keeps each request's body.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(req.URL.Path, "/v1/messages"):
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20}}`)
		case req.URL.Path == "/v1/responses":
			fmt.Fprint(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":30}}`)
		case strings.HasPrefix(req.URL.Path, "/v1beta/"):
			fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":20,"totalTokenCount":30},"modelVersion":"m"}`)
		default:
			fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) last() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return nil
	}
	return r.bodies[len(r.bodies)-1]
}

// reservationConfig: one channel per family, each model's max_output
// from the price table; output at 2 USD per million tokens is 2 units a
// token. gpt-tier's channel allows the priority service tier.
func reservationConfig() *caddyfile {
	return gatewayConfig().
		channel("oa", "openai", "{{UP}}", "sk-up", "gpt-x gpt-4o-mini").
		channel("oa-tier", "openai", "{{UP}}", "sk-up", "gpt-tier", "allow_fields service_tier").
		channel("an", "anthropic", "{{UP}}", "sk-up", "claude-x").
		channel("ge", "gemini", "{{UP}}", "sk-up", "gemini-x").
		price("gpt-x", "input 1", "output 2", "max_output 16384").
		price("gpt-4o-mini", "input 1", "output 2", "max_output 16384").
		price("gpt-tier", "input 1", "output 2").
		price("claude-x", "input 1", "output 2", "max_output 64000").
		price("gemini-x", "input 1", "output 2", "max_output 65536")
}

func post(t *testing.T, gw *gatewaytest.Gateway, path, key, body string, header http.Header) reply {
	t.Helper()
	h := http.Header{}
	for k, v := range header {
		h[k] = v
	}
	resp, b := gw.Do("POST", path, key, []byte(body), h)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// TestRequestWithoutLimitSendsTheReservedAllowance: a request with no
// output limit reaches the upstream with the model's max_output as its
// limit, by each vendor's name for it, and lowered to what the quota covers.
func TestRequestWithoutLimitSendsTheReservedAllowance(t *testing.T) {
	up := newRecorder(t)
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	rich := gw.AddUser("rich", 1_000_000_000)
	av := http.Header{"Anthropic-Version": {"2023-06-01"}}
	openaiBody := `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`

	cases := []struct {
		name, path, body string
		header           http.Header
		limit            func(map[string]any) int64
		want             int64
	}{
		{"openai", "/v1/chat/completions", openaiBody, nil,
			func(b map[string]any) int64 { return num(b["max_completion_tokens"]) }, 16384},
		{"openai responses", "/v1/responses", `{"model":"gpt-x","input":"hi"}`, nil,
			func(b map[string]any) int64 { return num(b["max_output_tokens"]) }, 16384},
		{"anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":333,"messages":[{"role":"user","content":"hi"}]}`, av,
			func(b map[string]any) int64 { return num(b["max_tokens"]) }, 333},
		{"gemini", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, nil,
			func(b map[string]any) int64 {
				g, _ := b["generationConfig"].(map[string]any)
				return num(g["maxOutputTokens"])
			}, 65536},
		// translated to Anthropic: the model's allowance, not a fixed 4096
		{"openai to anthropic", "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, nil,
			func(b map[string]any) int64 { return num(b["max_tokens"]) }, 64000},
	}
	for _, c := range cases {
		r := post(t, gw, c.path, rich, c.body, c.header)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		if got := c.limit(up.last()); got != c.want {
			t.Fatalf("%s: the upstream got a limit of %d, want %d (body %v)", c.name, got, c.want, up.last())
		}
	}

	// legacy completions: the allowance is max_tokens
	if r := post(t, gw, "/v1/completions", rich, `{"model":"gpt-x","prompt":"hi"}`, nil); r.status != 200 {
		t.Fatalf("completions: %d %s", r.status, r.body)
	}
	if got := num(up.last()["max_tokens"]); got != 16384 {
		t.Fatalf("completions: the upstream got max_tokens %d, want 16384", got)
	}

	// a user whose quota covers fewer tokens than max_output gets what it
	// covers: (quota - prompt estimate at 1 unit a token) / 2 units a token
	const quota = 10_000
	poor := gw.AddUser("poor", quota)
	prompt := int64(len(openaiBody) / 4)
	if r := post(t, gw, "/v1/chat/completions", poor, openaiBody, nil); r.status != 200 {
		t.Fatalf("poor: %d %s", r.status, r.body)
	}
	if got, want := num(up.last()["max_completion_tokens"]), (quota-prompt)/2; got != want {
		t.Fatalf("poor user's allowance %d, want %d", got, want)
	}
	// n: 3 reserves three answers: the allowance is a third
	three := `{"model":"gpt-x","n":3,"messages":[{"role":"user","content":"hi"}]}`
	if r := post(t, gw, "/v1/chat/completions", poor, three, nil); r.status != 200 {
		t.Fatalf("n=3: %d %s", r.status, r.body)
	}
	// the first request cost 10 + 20*2 = 50 units
	if got, want := num(up.last()["max_completion_tokens"]), (quota-50-int64(len(three)/4))/6; got != want {
		t.Fatalf("n=3 allowance %d, want %d", got, want)
	}
	// with its own limit, n: 3 reserves three times that limit
	fits := `{"model":"gpt-x","n":1,"max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`
	if r := post(t, gw, "/v1/chat/completions", poor, fits, nil); r.status != 200 {
		t.Fatalf("n=1 with 2000 tokens (4000 units) on ~9900: %d %s", r.status, r.body)
	}
	triple := strings.Replace(fits, `"n":1`, `"n":3`, 1)
	if r := post(t, gw, "/v1/chat/completions", poor, triple, nil); r.status != 429 || !strings.Contains(r.body, "insufficient_quota") {
		t.Fatalf("n=3 with 2000 tokens each (12000 units): %d %s", r.status, r.body)
	}
}

// TestImagePartsReserveTheVendorsWorstCase: an image reserves the most
// tokens its model's vendor documents for one image, not the size of its
// data: seen in the output allowance a modest quota leaves, which is what
// the upstream receives as its limit. part_tokens overrides every vendor.
func TestImagePartsReserveTheVendorsWorstCase(t *testing.T) {
	up := newRecorder(t)
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG)
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
			`{"type":"image_url","image_url":{"url":"` + png + `"}}]}]}`
	}
	limit := func(model string, b map[string]any) int64 {
		switch model {
		case "claude-x":
			return num(b["max_tokens"])
		case "gemini-x":
			g, _ := b["generationConfig"].(map[string]any)
			return num(g["maxOutputTokens"])
		}
		return num(b["max_completion_tokens"])
	}
	check := func(gw *gatewaytest.Gateway, want map[string]int64) {
		t.Helper()
		for model, perImage := range want {
			// a quota that leaves about 10,000 tokens of output, under
			// every model's max_output
			b := body(model)
			text := int64(len(b)-len(png)) / 4
			quota := perImage + text + 20_000
			key := gw.AddUser("u-"+model, quota)
			if r := post(t, gw, "/v1/chat/completions", key, b, nil); r.status != 200 {
				t.Fatalf("%s: %d %s", model, r.status, r.body)
			}
			// input at 1 unit a token, output at 2: the allowance is what
			// the quota leaves after the prompt, halved (within a few tokens:
			// the text is estimated from the body's size; vendors differ by
			// hundreds)
			want := (quota - text - perImage) / 2
			if got := limit(model, up.last()); got < want-10 || got > want+10 {
				t.Errorf("%s: allowance %d, want about %d (an image reserving %d tokens)", model, got, want, perImage)
			}
		}
	}
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	check(gw, map[string]int64{"gpt-x": 85 + 8*170, "gpt-4o-mini": 2833 + 8*5667, "claude-x": 1600, "gemini-x": 1120})
	gw.Stop()

	gw = gatewaytest.Start(t, reservationConfig().option("part_tokens 5000").String(), gatewaytest.Vars{"UP": up.URL})
	check(gw, map[string]int64{"gpt-x": 5000, "gpt-4o-mini": 5000, "claude-x": 5000, "gemini-x": 5000})
}

// TestPriceChangingFieldsNeedTheChannelsConsent: service_tier "priority"
// is refused with a 400 naming the field, unless the channel allows it.
func TestPriceChangingFieldsNeedTheChannelsConsent(t *testing.T) {
	up := newRecorder(t)
	gw := gatewaytest.Start(t, reservationConfig().String(), gatewaytest.Vars{"UP": up.URL})
	key := gw.AddUser("tia", 1_000_000_000)
	body := `{"model":"gpt-x","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`
	r := post(t, gw, "/v1/chat/completions", key, body, nil)
	if r.status != 400 || !strings.Contains(r.body, "service_tier") || !strings.Contains(r.body, `"param":"service_tier"`) {
		t.Fatalf("priority tier on a channel that does not allow it: %d %s", r.status, r.body)
	}
	if n := len(up.bodies); n != 0 {
		t.Fatalf("the refused request reached the upstream (%d requests)", n)
	}
	if r := post(t, gw, "/v1/chat/completions", key, strings.Replace(body, "priority", "default", 1), nil); r.status != 200 {
		t.Fatalf("the default tier: %d %s", r.status, r.body)
	}
	if r := post(t, gw, "/v1/chat/completions", key, strings.Replace(body, "gpt-x", "gpt-tier", 1), nil); r.status != 200 {
		t.Fatalf("priority tier on a channel that allows it: %d %s", r.status, r.body)
	}
	if up.last()["service_tier"] != "priority" {
		t.Fatalf("the allowed field was not relayed: %v", up.last())
	}
	// an Anthropic beta with a price of its own, and Gemini grounding
	r = post(t, gw, "/v1/messages", key, `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"context-1m-2025-08-07"}})
	if r.status != 400 || !strings.Contains(r.body, "context-1m-2025-08-07") || !strings.Contains(r.body, `"type":"error"`) {
		t.Fatalf("1M context beta: %d %s", r.status, r.body)
	}
	r = post(t, gw, "/v1beta/models/gemini-x:generateContent", key, `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"googleSearch":{}}]}`, nil)
	if r.status != 400 || !strings.Contains(r.body, "googleSearch") || !strings.Contains(r.body, `"status":"INVALID_ARGUMENT"`) {
		t.Fatalf("grounding: %d %s", r.status, r.body)
	}
}
