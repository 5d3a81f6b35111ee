package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// The compatible servers' own words for reasoning and cache reads are read
// on every path: a translated answer, a passthrough answer, a stream.
func TestCompatUsageFields(t *testing.T) {
	cases := []struct {
		name, usage string
		want        adapters.Usage
	}{
		// DeepSeek's API reference: prompt_tokens = hits + misses
		{"deepseek", `{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_cache_hit_tokens":1000,"prompt_cache_miss_tokens":200,"completion_tokens_details":{"reasoning_tokens":250}}`,
			adapters.Usage{PromptTokens: 1200, CompletionTokens: 300, CachedTokens: 1000, ReasoningTokens: 250}},
		// Moonshot's: cached_tokens at the top of usage
		{"moonshot", `{"prompt_tokens":800,"completion_tokens":20,"total_tokens":820,"cached_tokens":512}`,
			adapters.Usage{PromptTokens: 800, CompletionTokens: 20, CachedTokens: 512}},
		// OpenAI's own shape wins where both are sent
		{"both", `{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":4},"prompt_cache_hit_tokens":4}`,
			adapters.Usage{PromptTokens: 10, CompletionTokens: 1, CachedTokens: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + c.usage + `}`)
			for _, dialect := range []string{Name, "anthropic"} {
				resp, err := Adapter{}.DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: dialect}, body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Usage != c.want {
					t.Errorf("%s: usage %+v, want %+v", dialect, resp.Usage, c.want)
				}
			}
			chunk := []byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + c.usage + `}`)
			u, _, err := (&streamStep{}).Probe(&adapters.SSEEvent{Data: chunk})
			if err != nil || u == nil || *u != c.want {
				t.Errorf("stream usage %+v (%v), want %+v", u, err, c.want)
			}
		})
	}
}

func TestCompatReasoningWords(t *testing.T) {
	for _, word := range []string{"reasoning_content", "reasoning"} {
		body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"4","` + word + `":"2+2 is 4"},"finish_reason":"stop"}]}`)
		resp, err := DecodeChatResponse(body)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Message.Parts) != 2 || resp.Message.Parts[0].Type != adapters.PartThinking || resp.Message.Parts[0].Text != "2+2 is 4" {
			t.Errorf("%s: parts %+v, want the thinking first", word, resp.Message.Parts)
		}
		stream := "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"" + word + "\":\"2+2\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"
		evs := drain(t, stream)
		if !hasEvent(evs, adapters.EventThinkingDelta, "2+2") {
			t.Errorf("%s: stream events %+v, want a thinking delta", word, evs)
		}
	}
}

// Tool call deltas without an index, or with index 0 for every call, are
// told apart by their ids.
func TestCompatToolCallDeltas(t *testing.T) {
	cases := map[string]string{
		"no index": `{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}`,
		"one index, ids repeated": `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}`,
	}
	for name, chunks := range cases {
		t.Run(name, func(t *testing.T) {
			var stream strings.Builder
			for _, c := range strings.Split(chunks, "\n") {
				stream.WriteString("data: " + c + "\n\n")
			}
			stream.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
			calls := map[int]*adapters.ToolCall{}
			var order []int
			for _, ev := range drain(t, stream.String()) {
				switch ev.Type {
				case adapters.EventToolCallStart:
					calls[ev.Index] = &adapters.ToolCall{ID: ev.ToolCall.ID, Name: ev.ToolCall.Name}
					order = append(order, ev.Index)
				case adapters.EventToolCallDelta:
					calls[ev.Index].Arguments += ev.ToolCall.Arguments
				}
			}
			if len(order) != 2 {
				t.Fatalf("%d calls started, want 2: %+v", len(order), calls)
			}
			a, b := calls[order[0]], calls[order[1]]
			if a.ID != "call_a" || a.Name != "get_weather" || a.Arguments != `{"city":"Paris"}` || b.ID != "call_b" || b.Name != "get_time" || b.Arguments != "{}" {
				t.Errorf("calls %+v and %+v", a, b)
			}
		})
	}
}

// A stream whose server sends no [DONE] ends cleanly after its last chunk
// (finish reason, usage), translated or passed through; one cut before
// that is still a cut.
func TestCompatStreamWithoutDone(t *testing.T) {
	body := "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	withUsage := body + "data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n"
	cut := "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n"
	// OpenRouter's failure after the stream began: not a normal end
	failed := cut + "data: {\"id\":\"x\",\"error\":{\"code\":\"server_error\",\"message\":\"Provider disconnected\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}\n\n"
	for _, passthrough := range []bool{false, true} {
		for name, c := range map[string]struct {
			stream string
			clean  bool
		}{"finish": {body, true}, "usage": {withUsage, true}, "cut": {cut, false}, "error finish": {failed, false}} {
			dec := adapters.NewStreamDecoder(strings.NewReader(c.stream), &streamStep{}, passthrough, Name)
			var err error
			for err == nil {
				_, err = dec.Next()
			}
			if clean := errors.Is(err, io.EOF); clean != c.clean {
				t.Errorf("passthrough %v, %s: ended with %v", passthrough, name, err)
			}
		}
	}
}

func TestEncodeChatRequestWith(t *testing.T) {
	max := int64(100)
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Stream: true, Chat: &adapters.ChatRequest{
		MaxTokens: &max,
		Reasoning: &adapters.Reasoning{Effort: "high"},
		Messages: []adapters.Message{
			{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "weather?"}}},
			{Role: adapters.RoleAssistant, Parts: []adapters.Part{{Type: adapters.PartThinking, Text: "call the tool"}, {Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: "call_1", Name: "w", Arguments: "{}"}}}},
			{Role: adapters.RoleTool, Parts: []adapters.Part{{Type: adapters.PartToolResult, ToolResult: &adapters.ToolResult{CallID: "call_1", Content: []adapters.Part{{Type: adapters.PartText, Text: "sunny"}}}}}},
		},
	}}
	body, err := EncodeChatRequestWith(req, "deepseek-chat", WireOptions{MaxTokens: true, NoStreamOptions: true, ReasoningHistory: true, NoReasoningEffort: true})
	if err != nil {
		t.Fatal(err)
	}
	var w map[string]json.RawMessage
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	if string(w["max_tokens"]) != "100" || w["max_completion_tokens"] != nil || w["stream_options"] != nil || w["reasoning_effort"] != nil {
		t.Errorf("body %s", body)
	}
	if !bytes.Contains(w["messages"], []byte(`"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{}"}}],"reasoning_content":"call the tool"`)) {
		t.Errorf("the assistant turn's thinking was not sent back: %s", w["messages"])
	}
	plain, _ := EncodeChatRequest(req, "gpt-4.1")
	if bytes.Contains(plain, []byte("reasoning_content")) || !bytes.Contains(plain, []byte("max_completion_tokens")) {
		t.Errorf("OpenAI's own body changed: %s", plain)
	}
}

func TestPassthroughBodyWithMaxTokens(t *testing.T) {
	cases := map[string]struct {
		raw       string
		allowance int64
		want      string
	}{
		"renamed":   {`{"model":"m","max_completion_tokens":50,"messages":[]}`, 0, `{"model":"deepseek-chat","messages":[],"max_tokens":50}`},
		"both":      {`{"model":"m","max_tokens":40,"max_completion_tokens":50,"messages":[]}`, 0, `{"model":"deepseek-chat","max_tokens":40,"messages":[]}`},
		"allowance": {`{"model":"m","messages":[]}`, 64, `{"model":"deepseek-chat","messages":[],"max_tokens":64}`},
	}
	for name, c := range cases {
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(c.raw), &raw)
		req := &adapters.Request{Op: adapters.OpChat, Dialect: Name, Model: "m", Raw: []byte(c.raw), OutputAllowance: c.allowance, Chat: &adapters.ChatRequest{}}
		if _, ok := raw["max_completion_tokens"]; ok {
			req.Chat.MaxTokens = new(int64)
		}
		got, err := PassthroughBodyWith(req, "deepseek-chat", WireOptions{MaxTokens: true})
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s (%v), want %s", name, got, err, c.want)
		}
	}
}

func drain(t *testing.T, stream string) []adapters.StreamEvent {
	t.Helper()
	dec := adapters.NewStreamDecoder(strings.NewReader(stream), &streamStep{}, false, Name)
	var out []adapters.StreamEvent
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *ev)
	}
}

func hasEvent(evs []adapters.StreamEvent, typ adapters.EventType, text string) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.Text == text {
			return true
		}
	}
	return false
}

// Moonshot's stream reports usage inside its last chunk's choice.
func TestCompatChoiceUsage(t *testing.T) {
	chunk := []byte(`{"id":"cmpl-1","object":"chat.completion.chunk","created":1,"model":"kimi-k2-0905-preview","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":19,"completion_tokens":13,"total_tokens":32,"cached_tokens":16}}]}`)
	want := adapters.Usage{PromptTokens: 19, CompletionTokens: 13, CachedTokens: 16}
	u, _, err := (&streamStep{}).Probe(&adapters.SSEEvent{Data: chunk})
	if err != nil || u == nil || *u != want {
		t.Errorf("passthrough usage %+v (%v), want %+v", u, err, want)
	}
	evs, _, err := (&streamStep{}).Translate(nil, &adapters.SSEEvent{Data: chunk})
	var got *adapters.Usage
	for _, ev := range evs {
		if ev.Type == adapters.EventUsage {
			got = ev.Usage
		}
	}
	if err != nil || got == nil || *got != want {
		t.Errorf("translated usage %+v (%v), want %+v", got, err, want)
	}
}

// Mistral takes tool call ids of nine letters and digits: an Anthropic
// history's ids are sent shortened, a call and its result alike, and an id
// of that form already is kept.
func TestShortToolCallIDs(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Chat: &adapters.ChatRequest{Messages: []adapters.Message{
		{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "weather?"}}},
		{Role: adapters.RoleAssistant, Parts: []adapters.Part{
			{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: "toolu_01A09q90qw90lq917835lq9", Name: "w", Arguments: "{}"}},
			{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: "D681PevKs", Name: "w", Arguments: "{}"}},
		}},
		{Role: adapters.RoleTool, Parts: []adapters.Part{
			{Type: adapters.PartToolResult, ToolResult: &adapters.ToolResult{CallID: "toolu_01A09q90qw90lq917835lq9", Content: []adapters.Part{{Type: adapters.PartText, Text: "sunny"}}}},
			{Type: adapters.PartToolResult, ToolResult: &adapters.ToolResult{CallID: "D681PevKs", Content: []adapters.Part{{Type: adapters.PartText, Text: "rain"}}}},
		}},
	}}}
	body, err := EncodeChatRequestWith(req, "mistral-large-latest", WireOptions{ShortToolCallIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	var w chatRequest
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	calls, results := w.Messages[1].ToolCalls, w.Messages[2:]
	if len(calls) != 2 || len(results) != 2 {
		t.Fatalf("body %s", body)
	}
	for i, c := range calls {
		if len(c.ID) != 9 || strings.Trim(c.ID, idAlphabet) != "" || results[i].ToolCallID != c.ID {
			t.Errorf("call %q, its result %q", c.ID, results[i].ToolCallID)
		}
	}
	if calls[1].ID != "D681PevKs" {
		t.Errorf("a valid id changed to %q", calls[1].ID)
	}
}

// reasoning in another shape than a string is ignored, not refused.
func TestCompatReasoningNotString(t *testing.T) {
	body := []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning":{"effort":"low"}},"finish_reason":"stop"}]}`)
	resp, err := DecodeChatResponse(body)
	if err != nil || len(resp.Message.Parts) != 1 {
		t.Errorf("%+v %v", resp, err)
	}
}

// A translated request that asks for thinking asks each server in its words.
func TestThinkingWords(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Chat: &adapters.ChatRequest{
		Reasoning: &adapters.Reasoning{BudgetTokens: 2048},
		Messages:  []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "hi"}}}},
	}}
	for word, want := range map[string]string{"enable_thinking": `"enable_thinking":true,"thinking_budget":2048}`, "thinking": `"thinking":{"type":"enabled"}}`} {
		body, err := EncodeChatRequestWith(req, "m", WireOptions{Thinking: word})
		if err != nil || !strings.HasSuffix(string(body), want) || strings.Contains(string(body), "reasoning_effort") {
			t.Errorf("%s: %s (%v)", word, body, err)
		}
	}
	req.Chat.Reasoning = nil
	if body, _ := EncodeChatRequestWith(req, "m", WireOptions{Thinking: "thinking"}); strings.Contains(string(body), "thinking") {
		t.Errorf("thinking asked for unasked: %s", body)
	}
}
