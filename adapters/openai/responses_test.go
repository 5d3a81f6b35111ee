package openai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func decodeResponses(t *testing.T, body string) *adapters.Request {
	t.Helper()
	req, err := oai.DecodeRequest(adapters.OpResponses, []byte(body), post("/v1/responses"))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return req
}

// A Responses request in neutral form: instructions and leading developer
// messages as the system prompt, a later one at its place, a turn's
// reasoning, text and calls in one assistant message, the outputs in one
// tool message, and the options that translate.
func TestResponsesDecode(t *testing.T) {
	req := decodeResponses(t, `{"model":"m","instructions":"Be brief.","stream":true,
		"input":[
			{"role":"developer","content":[{"type":"input_text","text":"Use tools."}]},
			{"role":"user","content":[{"type":"input_text","text":"Weather?"},{"type":"input_image","image_url":"data:image/png;base64,iVBO","detail":"low"}]},
			{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],"encrypted_content":"opaque"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
			{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call_output","call_id":"c1","output":"18C"},
			{"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
			{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"21C"}]},
			{"role":"system","content":"Answer in French."}
		],
		"tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}],
		"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,"max_output_tokens":300,
		"temperature":0.5,"reasoning":{"effort":"low","summary":"auto"},
		"text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}},
		"store":false,"prompt_cache_key":"k","include":["reasoning.encrypted_content"],"client_metadata":{"a":"b"}}`)
	c := req.Chat
	if req.Model != "m" || !req.Stream || req.Translatable() != nil {
		t.Fatalf("model %q stream %v untranslatable %v", req.Model, req.Stream, req.Translatable())
	}
	if len(c.System) != 2 || c.System[0].Text != "Be brief." || c.System[1].Text != "Use tools." {
		t.Errorf("system %+v", c.System)
	}
	roles := []string{}
	for _, m := range c.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,system" {
		t.Fatalf("roles %v", roles)
	}
	if img := c.Messages[0].Parts[1].Image; img == nil || img.MediaType != "image/png" || img.Detail != "low" {
		t.Errorf("image %+v", c.Messages[0].Parts[1])
	}
	asst := c.Messages[1].Parts
	if len(asst) != 4 || asst[0].Type != adapters.PartThinking || asst[0].Text != "think" || asst[0].Signature != "openai:opaque" ||
		asst[1].Text != "Checking." || asst[2].ToolCall.ID != "c1" || asst[3].ToolCall.Arguments != `{"city":"Rome"}` {
		t.Errorf("assistant parts %+v", asst)
	}
	res := c.Messages[2].Parts
	if len(res) != 2 || res[0].ToolResult.Name != "get_weather" || res[1].ToolResult.Content[0].Text != "21C" {
		t.Errorf("results %+v", res)
	}
	if c.Messages[3].Parts[0].Text != "Answer in French." {
		t.Errorf("late system %+v", c.Messages[3])
	}
	if len(c.Tools) != 1 || c.Tools[0].Strict == nil || !*c.Tools[0].Strict || c.ToolChoice.Mode != adapters.ToolChoiceTool || c.ToolChoice.Name != "get_weather" ||
		*c.ParallelToolCalls || *c.MaxTokens != 300 || *c.Temperature != 0.5 || c.Reasoning.Effort != "low" ||
		c.ResponseFormat.Type != "json_schema" || c.ResponseFormat.Name != "w" || !*c.ResponseFormat.Strict {
		t.Errorf("options %+v", c)
	}
}

// What only OpenAI can honour is recorded, naming the field, for a
// translating provider to refuse; the decode itself succeeds so that an
// OpenAI channel gets the body.
func TestResponsesUntranslatable(t *testing.T) {
	for body, param := range map[string]string{
		`"previous_response_id":"resp_1"`:                                 "previous_response_id",
		`"store":true`:                                                    "store",
		`"conversation":"conv_1"`:                                         "conversation",
		`"tools":[{"type":"web_search"}]`:                                 "tools",
		`"tools":[{"type":"namespace","name":"n"}]`:                       "tools",
		`"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`: "tool_choice",
		`"include":["file_search_call.results"]`:                          "include",
		`"truncation":"auto"`:                                             "truncation",
		`"text":{"verbosity":"low"}`:                                      "text.verbosity",
		`"some_new_option":1`:                                             "some_new_option",
	} {
		req := decodeResponses(t, `{"model":"m","input":"hi",`+body+`}`)
		var e *adapters.Error
		if !errors.As(req.Translatable(), &e) || e.Status != 400 || e.Param != param || !strings.Contains(e.Message, "'"+param+"'") {
			t.Errorf("%s: %v", body, req.Translatable())
		}
	}
	for _, body := range []string{`"store":false`, `"prompt_cache_key":"k"`, `"include":["reasoning.encrypted_content"]`, `"metadata":{"a":"b"}`, `"service_tier":"auto"`} {
		if req := decodeResponses(t, `{"model":"m","input":"hi",`+body+`}`); req.Translatable() != nil {
			t.Errorf("%s refused: %v", body, req.Translatable())
		}
	}
	for body, want := range map[string]string{
		`{"input":"hi"}`: "'model' is required",
		`{"model":"m"}`:  "'input' is required",
		`{"model":"m","input":[{"role":"narrator","content":"x"}]}`:   "role",
		`{"model":"m","input":"x","reasoning":{"effort":"extreme"}}`:  "reasoning.effort",
		`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`: "text.format.type",
	} {
		_, err := oai.DecodeRequest(adapters.OpResponses, []byte(body), post("/v1/responses"))
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// thinkingAnswer is an answer with every kind of output.
func thinkingAnswer() *adapters.Response {
	return &adapters.Response{ID: "msg_1", Model: "claude-x", StopReason: adapters.StopToolCalls,
		Usage: adapters.Usage{PromptTokens: 100, CachedTokens: 40, CompletionTokens: 30, ReasoningTokens: 10},
		Message: adapters.Message{Role: adapters.RoleAssistant, Parts: []adapters.Part{
			{Type: adapters.PartThinking, Text: "Let me see.", Signature: "anthropic:sig1"},
			{Type: adapters.PartText, Text: "Checking."},
			{Type: adapters.PartToolCall, ToolCall: &adapters.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		}}}
}

var volatile = regexp.MustCompile(`"(id|created_at|item_id)":("[^"]*"|\d+)`)

// A translated answer as a response object, and its reasoning handed back
// on the next turn: the vendor gets its own thinking and signature.
func TestResponsesEncodeAndReasoningRoundTrip(t *testing.T) {
	req := decodeResponses(t, `{"model":"claude-x","input":"hi","reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"]}`)
	out, err := oai.EncodeResponse(req, thinkingAnswer())
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Object, Status, Model string
		Output                []json.RawMessage
		Usage                 struct {
			InputTokens        int64 `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokens        int64 `json:"output_tokens"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
			TotalTokens int64 `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	u := r.Usage
	if r.Object != "response" || r.Status != "completed" || len(r.Output) != 3 || u.InputTokens != 100 || u.InputTokensDetails.CachedTokens != 40 ||
		u.OutputTokens != 30 || u.OutputTokensDetails.ReasoningTokens != 10 || u.TotalTokens != 130 {
		t.Fatalf("%s", out)
	}
	var kinds []string
	for _, o := range r.Output {
		var it struct{ Type string }
		_ = json.Unmarshal(o, &it)
		kinds = append(kinds, it.Type)
	}
	if strings.Join(kinds, ",") != "reasoning,message,function_call" {
		t.Errorf("output %s", out)
	}
	// the next turn sends the items back as they came
	next := `{"model":"claude-x","input":[{"role":"user","content":"hi"},` + string(r.Output[0]) + `,` + string(r.Output[1]) + `,` + string(r.Output[2]) +
		`,{"type":"function_call_output","call_id":"toolu_1","output":"18C"}]}`
	turn := decodeResponses(t, next).Chat.Messages[1].Parts
	if turn[0].Type != adapters.PartThinking || turn[0].Text != "Let me see." || turn[0].Signature != "anthropic:sig1" {
		t.Errorf("reasoning came back as %+v", turn[0])
	}
	if turn[2].ToolCall == nil || turn[2].ToolCall.ID != "toolu_1" {
		t.Errorf("call came back as %+v", turn[2])
	}

	// out of tokens: incomplete, with the reason
	a := thinkingAnswer()
	a.StopReason = adapters.StopLength
	out, _ = oai.EncodeResponse(req, a)
	if !bytes.Contains(out, []byte(`"status":"incomplete"`)) || !bytes.Contains(out, []byte(`"incomplete_details":{"reason":"max_output_tokens"}`)) {
		t.Errorf("length stop: %s", out)
	}
}

type sseFrame struct {
	name string
	data map[string]any
	raw  string
}

func responsesFrames(t *testing.T, b []byte) []sseFrame {
	t.Helper()
	var out []sseFrame
	sc := bufio.NewScanner(bytes.NewReader(b))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
		case strings.HasPrefix(line, "data: "):
			f := sseFrame{name: name, raw: line[6:]}
			if err := json.Unmarshal([]byte(f.raw), &f.data); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if f.data["type"] != name {
				t.Errorf("event %s carries type %v", name, f.data["type"])
			}
			out = append(out, f)
		}
	}
	return out
}

// The stream of a translated answer: every event numbered in order, the
// events the SDKs accumulate, and a final response equal to the
// non-streamed one.
func TestResponsesStream(t *testing.T) {
	req := decodeResponses(t, `{"model":"claude-x","input":"hi","stream":true,"reasoning":{"summary":"auto"},"include":["reasoning.encrypted_content"]}`)
	enc := oai.NewStreamEncoder(req)
	if enc.ContentType() != "text/event-stream" {
		t.Errorf("content type %s", enc.ContentType())
	}
	var b []byte
	for _, ev := range []*adapters.StreamEvent{
		{Type: adapters.EventStart, ID: "msg_1", Model: "claude-x"},
		{Type: adapters.EventThinkingDelta, Index: 0, Text: "Let me "},
		{Type: adapters.EventThinkingDelta, Index: 0, Text: "see."},
		{Type: adapters.EventThinkingDelta, Index: 0, Signature: "anthropic:sig1"},
		{Type: adapters.EventTextDelta, Index: 1, Text: "Check"},
		{Type: adapters.EventTextDelta, Index: 1, Text: "ing."},
		{Type: adapters.EventToolCallStart, Index: 2, ToolCall: &adapters.ToolCall{ID: "toolu_1", Name: "get_weather"}},
		{Type: adapters.EventToolCallDelta, Index: 2, ToolCall: &adapters.ToolCall{Arguments: `{"city":`}},
		{Type: adapters.EventToolCallDelta, Index: 2, ToolCall: &adapters.ToolCall{Arguments: `"Paris"}`}},
		{Type: adapters.EventFinish, StopReason: adapters.StopToolCalls},
		{Type: adapters.EventUsage, Usage: &thinkingAnswer().Usage},
	} {
		b = enc.Encode(b, ev)
	}
	b = enc.Finish(b)
	fs := responsesFrames(t, b)
	var names []string
	for i, f := range fs {
		names = append(names, f.name)
		if f.data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: sequence_number %v", i, f.name, f.data["sequence_number"])
		}
	}
	want := "response.created response.in_progress " +
		"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta response.reasoning_summary_text.delta " +
		"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(names, " "), want)
	}
	last, _ := json.Marshal(fs[len(fs)-1].data["response"])
	whole, err := oai.EncodeResponse(req, thinkingAnswer())
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	_ = json.Unmarshal(volatile.ReplaceAll(last, []byte(`"$1":0`)), &x)
	_ = json.Unmarshal(volatile.ReplaceAll(whole, []byte(`"$1":0`)), &y)
	if x == nil || y == nil {
		t.Fatalf("final responses %s / %s", last, whole)
	}
	if xb, _ := json.Marshal(x); !bytes.Equal(xb, mustJSON(y)) {
		t.Errorf("streamed final response\n%s\nnon-streamed\n%s", xb, mustJSON(y))
	}

	// a failure after the first byte: error, then response.failed
	enc = oai.NewStreamEncoder(req)
	b = enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventTextDelta, Text: "Hi"})
	b = enc.Error(b, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "upstream broke"))
	fs = responsesFrames(t, b)
	if n := len(fs); n < 2 || fs[n-2].name != "error" || fs[n-1].name != "response.failed" || !strings.Contains(fs[n-1].raw, `"status":"failed"`) ||
		!strings.Contains(fs[n-1].raw, "upstream broke") {
		t.Errorf("error frames %v", fs)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Any body: a 400 or a request, never a panic; a decoded request renders
// an answer and a stream.
func FuzzResponsesDecode(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"reasoning","encrypted_content":"gateway:e30"},{"type":"function_call","call_id":"c","name":"n"},{"type":"function_call_output","call_id":"c","output":[]}],"tools":[{"type":"function","name":"n"}]}`))
	f.Add([]byte(`{"model":"m","instructions":[{"role":"system","content":"x"}],"input":[{"role":"developer","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := oai.DecodeRequest(adapters.OpResponses, body, post("/v1/responses"))
		if err != nil {
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if _, err := oai.EncodeResponse(req, thinkingAnswer()); err != nil {
			t.Fatal(err)
		}
		enc := oai.NewStreamEncoder(req)
		enc.Finish(enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventTextDelta, Text: "x"}))
	})
}
