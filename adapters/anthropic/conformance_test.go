package anthropic_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

const valid = `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

// The conformance kit runs testdata through every registered family.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Suite{
		Name:          "anthropic",
		UpstreamModel: "claude-sonnet-4-5",
		CountTokens:   true,
		Refusals:      refusals,
	})
}

// What the dialect refuses, and what other dialects send that Anthropic
// cannot take: a 400 that says what and why, never dropped.
var refusals = []adaptertest.Refusal{
	{Name: "no version", Path: "/v1/messages", Body: valid, Status: 400, Message: "anthropic-version header is required"},
	{Name: "empty", Body: ``, Status: 400, Message: "empty"},
	{Name: "not json", Body: `{"model":`, Status: 400, Message: "not valid JSON"},
	{Name: "wrong type", Body: `{"model":"m","max_tokens":"ten","messages":[]}`, Status: 400, Message: "'max_tokens'"},
	{Name: "no model", Body: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'model' is required"},
	{Name: "no max_tokens", Body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'max_tokens' is required"},
	{Name: "no messages", Body: `{"model":"m","max_tokens":10,"messages":[]}`, Status: 400, Message: "'messages' must be a non-empty"},
	{Name: "system turn with an image", Body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`, Status: 400, Message: "messages.1.content.0.type: Input tag 'image'"},
	{Name: "bad role", Body: `{"model":"m","max_tokens":10,"messages":[{"role":"tool","content":"hi"}]}`, Status: 400, Message: "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
	{Name: "bad image", Body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!"}}]}]}`, Status: 400, Message: "messages.0.content.0.source.data"},
	{Name: "bad tool_result", Body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, Status: 400, Message: "tool_use_id"},
	{Name: "bad thinking", Body: `{"model":"m","max_tokens":10,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "budget_tokens"},
	{Name: "count no version", Op: adapters.OpCountTokens, Path: "/v1/messages/count_tokens", Body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "anthropic-version"},

	{Name: "n", Dialect: "openai", Body: `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'n'"},
	{Name: "seed", Dialect: "openai", Body: `{"model":"m","seed":7,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'seed'"},
	{Name: "penalty", Dialect: "openai", Body: `{"model":"m","presence_penalty":0.5,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "presence_penalty"},
	{Name: "temperature", Dialect: "openai", Body: `{"model":"m","temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "0 to 1"},
	{Name: "json mode", Dialect: "openai", Body: `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "json_schema instead"},
	{Name: "audio", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, Status: 400, Message: "input_audio"},
	{Name: "bad args", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`, Status: 400, Message: "not a JSON object"},
	{Name: "svg", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}}]}]}`, Status: 400, Message: "image/svg+xml"},
	// a Gemini client's built-in tool
	{Name: "googleSearch", Dialect: "gemini", Body: `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"googleSearch":{}}]}`, Status: 400, Message: "googleSearch"},
}
