package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// startResponses is the dialect matrix's gateway, its OpenAI fake also
// reporting reasoning tokens.
func startResponses(t *testing.T) *dialectsSetup {
	t.Helper()
	s := startDialects(t)
	s.fakes["gpt-test"].Set(func(b *gatewaytest.Behavior) { b.ReasoningTokens = fakeReasoning })
	return s
}

const fakeReasoning = 3

// costOf is what one turn of the matrix costs on the model's channel.
func costOf(model string) int64 {
	for _, f := range families {
		if f.model == model {
			return f.cost
		}
	}
	return -1
}

// turns are the generation requests the model's upstream read for one
// conversation, told apart by its system prompt.
func turns(s *dialectsSetup, model, system string) []gatewaytest.Recorded {
	var out []gatewaytest.Recorded
	for _, r := range s.fakes[model].Requests() {
		if r.System == system {
			out = append(out, r)
		}
	}
	return out
}

var weatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name:        "get_weather",
	Description: openai.String("The weather in a city"),
	Strict:      openai.Bool(true),
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"}, "additionalProperties": false},
}}

// responsesCall makes one Responses call, streamed or not. Streamed, it
// checks the events' sequence numbers and accumulates them with the SDK's
// accumulator, returning the response it reconstructs.
func responsesCall(t *testing.T, client *openai.Client, params responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("Responses.New: %v", err)
		}
		return resp
	}
	st := client.Responses.NewStreaming(ctx, params)
	var acc responses.ResponseAccumulator
	var seq int64
	var deltas strings.Builder
	var types []string
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq {
			t.Errorf("event %d (%s) has sequence_number %d", seq, ev.Type, ev.SequenceNumber)
		}
		seq++
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
		}
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("the accumulator refused %s: %v\n%s", ev.Type, err, ev.RawJSON())
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types %v", types)
	}
	resp, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatalf("accumulator: %v", err)
	}
	if snap := acc.Snapshot(); snap.OutputText() != resp.OutputText() || deltas.String() != resp.OutputText() {
		t.Errorf("the deltas say %q, the snapshot %q, the final response %q", deltas.String(), snap.OutputText(), resp.OutputText())
	}
	return resp
}

// ids are the parts of a response that differ between two calls.
var ids = regexp.MustCompile(`"(id|call_id|created_at)":("[^"]*"|\d+)`)

func outputShape(t *testing.T, r *responses.Response) string {
	t.Helper()
	var out []json.RawMessage
	for _, it := range r.Output {
		out = append(out, json.RawMessage(it.RawJSON()))
	}
	b, _ := json.Marshal(out)
	return ids.ReplaceAllString(string(b), `"$1":"*"`)
}

// TestResponsesAPI: openai-go's Responses.New and its streaming
// accumulator against a channel of each family, over a tool round trip:
// the same final response streamed or not, the upstream sent the whole
// conversation in its own shape, and each turn billed to the unit.
func TestResponsesAPI(t *testing.T) {
	s := startResponses(t)
	for _, model := range []string{"gpt-test", "claude-test", "gemini-test"} {
		shapes := map[bool][2]string{}
		for _, stream := range []bool{false, true} {
			name := model
			if stream {
				name += " streaming"
			}
			t.Run(name, func(t *testing.T) {
				user := strings.ReplaceAll("responses "+name, " ", "-")
				key := s.gw.AddUser(user, 10_000_000)
				client := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
				system := systemPrompt + " [" + user + "]"
				dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(testPNG)
				input := responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
						{OfInputText: &responses.ResponseInputTextParam{Text: userPrompt}},
						{OfInputImage: &responses.ResponseInputImageParam{ImageURL: openai.String(dataURL), Detail: responses.ResponseInputImageDetailAuto}},
					}, responses.EasyInputMessageRoleUser),
				}
				params := responses.ResponseNewParams{
					Model:        model,
					Instructions: openai.String(system),
					Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
					Tools:        []responses.ToolUnionParam{weatherTool},
				}
				first := responsesCall(t, &client, params, stream)
				if first.Status != "completed" || first.OutputText() != "Checking." {
					t.Errorf("turn 1: status %q text %q", first.Status, first.OutputText())
				}
				// the assistant's items go back as they came, with the outputs
				var calls []string
				for _, it := range first.Output {
					input = append(input, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(it.RawJSON())))
					if it.Type == "function_call" {
						fc := it.AsFunctionCall()
						calls = append(calls, fc.Name+fc.Arguments)
						out := responses.ResponseInputItemParamOfFunctionCallOutput(weatherFor(fc.Arguments))
						out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
						input = append(input, out)
					}
				}
				if strings.Join(calls, " ") != `get_weather{"city":"Paris"} get_weather{"city":"Rome"}` {
					t.Fatalf("turn 1 calls %v", calls)
				}
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
				second := responsesCall(t, &client, params, stream)
				if second.OutputText() != "Weather: 18C, 21C." {
					t.Errorf("turn 2 text %q", second.OutputText())
				}
				shapes[stream] = [2]string{outputShape(t, first), outputShape(t, second)}

				seen := turns(s, model, system)
				if len(seen) != 2 {
					t.Fatalf("the upstream saw %d turns, want 2", len(seen))
				}
				if seen[0].Prompt != userPrompt || !bytes.Equal(seen[0].Image, testPNG) || strings.Join(seen[0].Tools, ",") != "get_weather" ||
					seen[0].Stream != stream || seen[1].Stream != stream {
					t.Errorf("turn 1 upstream: %+v", seen[0])
				}
				if strings.Join(seen[1].Results, ",") != "18C,21C" {
					t.Errorf("turn 2 upstream results %q", seen[1].Results)
				}

				reasoning := map[string]int64{"gpt-test": fakeReasoning}[model]
				for _, r := range []*responses.Response{first, second} {
					if r.Usage.InputTokens != fakePrompt || r.Usage.InputTokensDetails.CachedTokens != fakeCached || r.Usage.OutputTokens != fakeCompletion ||
						r.Usage.OutputTokensDetails.ReasoningTokens != reasoning || r.Usage.TotalTokens != fakePrompt+fakeCompletion {
						t.Errorf("usage %+v", r.Usage)
					}
				}
				rows := s.gw.WaitUsage(user, 2)
				for _, r := range rows {
					if r.PromptTokens != fakePrompt || r.CachedTokens != fakeCached || r.CompletionTokens != fakeCompletion || r.ReasoningTokens != reasoning ||
						r.Cost != costOf(model) || r.Estimated || r.Status != 200 || r.Stream != stream || r.Endpoint != "/v1/responses" {
						t.Errorf("usage row %+v", r)
					}
				}
			})
		}
		if shapes[false] != shapes[true] {
			t.Errorf("%s: streamed and non-streamed responses differ:\n%s\n%s", model, shapes[false], shapes[true])
		}
	}
}

// TestResponsesRefusals: what a translated channel cannot honour is a 400
// naming the field; the same body reaches an OpenAI channel untouched.
func TestResponsesRefusals(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("refusals", 10_000_000)
	cases := []struct {
		body, param, says string
	}{
		{`"previous_response_id":"resp_1"`, "previous_response_id", "keeps no conversation state"},
		{`"store":true`, "store", "keeps no conversation state"},
		{`"tools":[{"type":"web_search"}]`, "tools", `"web_search" tool`},
		{`"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]`, "tools", `"file_search" tool`},
		{`"tools":[{"type":"namespace","name":"ns","tools":[]}]`, "tools", `"namespace" tool`},
		{`"background":true`, "background", "background"},
		{`"include":["web_search_call.results"]`, "include", "web_search_call.results"},
		{`"input":[{"type":"item_reference","id":"msg_1"}]`, "input[0] (item_reference)", "keeps no conversation state"},
	}
	for _, c := range cases {
		for _, model := range []string{"claude-test", "gemini-test"} {
			body := `{"model":"` + model + `","input":"hi",` + c.body + `}`
			if strings.HasPrefix(c.body, `"input"`) {
				body = `{"model":"` + model + `",` + c.body + `}`
			}
			resp, out := s.gw.Do("POST", "/v1/responses", key, []byte(body), nil)
			e, _ := errorBody(out)
			if resp.StatusCode != 400 || e.Param != c.param || !strings.Contains(e.Message, c.says) {
				t.Errorf("%s %s: %d %s", model, c.body, resp.StatusCode, out)
			}
		}
		body := `{"model":"gpt-test","input":"hi",` + c.body + `}`
		if strings.HasPrefix(c.body, `"input"`) {
			continue // the fake has no stored items to refer to
		}
		resp, out := s.gw.Do("POST", "/v1/responses", key, []byte(body), nil)
		seen := s.fakes["gpt-test"].Requests()
		// relayed as the client wrote it, plus the output allowance the
		// gateway reserved (default_max_tokens, 1024) as the upstream's limit
		want := strings.TrimSuffix(body, "}") + `,"max_output_tokens":1024}`
		if resp.StatusCode != 200 || len(seen) == 0 || !bytes.Equal(seen[len(seen)-1].Raw, []byte(want)) {
			t.Errorf("OpenAI channel, %s: %d %s", c.body, resp.StatusCode, out)
		}
	}
	// caching and telemetry fields are accepted on every family
	for _, model := range []string{"claude-test", "gemini-test", "gpt-test"} {
		body := `{"model":"` + model + `","input":"hi","store":false,"prompt_cache_key":"k","client_metadata":{"a":"b"},"include":["reasoning.encrypted_content"],"metadata":{"x":"y"}}`
		resp, out := s.gw.Do("POST", "/v1/responses", key, []byte(body), nil)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", model, resp.StatusCode, out)
		}
	}
}

// TestResponsesModelLimits: a key limited to some models lists only those
// and may call the Responses API with only those, as with chat.
func TestResponsesModelLimits(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("limited", 10_000_000, "--models", "claude-test")
	resp, out := s.gw.Do("GET", "/v1/models", key, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"claude-test"`) || strings.Contains(string(out), "gpt-test") {
		t.Errorf("models: %d %s", resp.StatusCode, out)
	}
	for model, status := range map[string]int{"claude-test": 200, "gpt-test": 403} {
		resp, out := s.gw.Do("POST", "/v1/responses", key, []byte(`{"model":"`+model+`","input":"hi"}`), nil)
		if resp.StatusCode != status {
			t.Errorf("%s: %d %s", model, resp.StatusCode, out)
		}
	}
	rows := s.gw.WaitUsage("limited", 2)
	for _, r := range rows {
		if (r.Model == "gpt-test") != (r.Status == 403) || (r.Status == 403 && r.Cost != 0) {
			t.Errorf("usage row %+v", r)
		}
	}
}

// TestResponsesWebSocket: Codex opens GET /v1/responses as a WebSocket
// first; it gets 426 at once and posts instead.
func TestResponsesWebSocket(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("socket", 10_000_000)
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-WebSocket-Version": {"13"},
		"Sec-WebSocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "OpenAI-Beta": {"responses_websockets=2026-02-06"}}
	resp, body := s.gw.Do("GET", "/v1/responses", key, nil, h)
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), "POST") {
		t.Errorf("GET /v1/responses as a socket: %d %s", resp.StatusCode, body)
	}
	if len(s.fakes["gpt-test"].Requests()) != 0 {
		t.Error("the upgrade reached the upstream")
	}
}

// TestUnknownModelBeforeBody: an unknown model is a 404 in the caller's
// dialect whatever else is wrong with the body (Claude Code tells "no such
// model" from "bad request" by it).
func TestUnknownModelBeforeBody(t *testing.T) {
	s := startResponses(t)
	key := s.gw.AddUser("unknown", 10_000_000)
	cases := []struct {
		path, body string
		header     http.Header
		want       string
	}{
		// no max_tokens, a bad role: still the model's 404
		{"/v1/messages", `{"model":"claude-nope","messages":[{"role":"narrator","content":"hi"}]}`, http.Header{"anthropic-version": {"2023-06-01"}}, `"type":"not_found_error"`},
		{"/v1/responses", `{"model":"gpt-nope","input":[{"type":"bogus"}],"reasoning":{"effort":"extreme"}}`, nil, `"code":"model_not_found"`},
		{"/v1/chat/completions", `{"model":"gpt-nope","messages":[]}`, nil, `"code":"model_not_found"`},
		{"/v1beta/models/gemini-nope:generateContent", `{"contents":"not a list"}`, nil, `"status":"NOT_FOUND"`},
	}
	for _, c := range cases {
		resp, out := s.gw.Do("POST", c.path, key, []byte(c.body), c.header)
		if resp.StatusCode != 404 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, out)
		}
	}
	// a known model with the same mistakes is a 400
	resp, out := s.gw.Do("POST", "/v1/messages", key, []byte(`{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`), http.Header{"anthropic-version": {"2023-06-01"}})
	if resp.StatusCode != 400 || !strings.Contains(string(out), "max_tokens") {
		t.Errorf("known model: %d %s", resp.StatusCode, out)
	}
}

// demoConfig is the local demo model, answering without delay.
func demoConfig() *caddyfile {
	return gatewayConfig().
		channel("local", block("demo", "word_delay 1ns"), "", "", "demo").
		free("demo")
}

// TestDemoAnswersResponses: the local demo model answers the Responses
// API in its wire format, streamed and not, so `make run` works for
// Responses clients too.
func TestDemoAnswersResponses(t *testing.T) {
	gw := gatewaytest.Start(t, demoConfig().String(), nil)
	key := gw.AddUser("demo", 1_000_000)
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "demo", Instructions: openai.String("Echo."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("echo these four words")}}
	for _, stream := range []bool{false, true} {
		r := responsesCall(t, &client, params, stream)
		if r.OutputText() != "echo these four words" || r.Usage.OutputTokens != 4 || r.Usage.InputTokens == 0 || r.Model != "demo" {
			t.Errorf("stream %v: %q usage %+v model %q", stream, r.OutputText(), r.Usage, r.Model)
		}
	}
	for _, r := range gw.WaitUsage("demo", 2) {
		if r.Status != 200 || r.CompletionTokens != 4 || r.Estimated || r.Channel != "local" {
			t.Errorf("usage row %+v", r)
		}
	}
}
