package gemini_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The conformance kit runs testdata through every registered family.
func TestConformance(t *testing.T) {
	stubFetch(t)
	adaptertest.Run(t, adaptertest.Suite{
		Name:          "gemini",
		UpstreamModel: "gemini-2.5-flash",
		CountTokens:   true,
		Refusals:      refusals,
	})
}

const gen = "/v1beta/models/g:generateContent"

var refusals = []adaptertest.Refusal{
	// what the dialect refuses
	{Name: "no contents", Path: gen, Body: `{"contents":[]}`, Status: 400, Message: "'contents' must be a non-empty"},
	{Name: "empty", Path: gen, Body: ``, Status: 400, Message: "empty"},
	{Name: "bad role", Path: gen, Body: `{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`, Status: 400, Message: "\"user\" or \"model\""},
	{Name: "bad base64", Path: gen, Body: `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"!!"}}]}]}`, Status: 400, Message: "contents[0].parts[0].inlineData.data"},
	{Name: "no call name", Path: gen, Body: `{"contents":[{"role":"model","parts":[{"functionCall":{"args":{}}}]}]}`, Status: 400, Message: "functionCall.name"},
	{Name: "bad mode", Path: gen, Body: `{"contents":[{"parts":[{"text":"x"}]}],"toolConfig":{"functionCallingConfig":{"mode":"SOMETIMES"}}}`, Status: 400, Message: "functionCallingConfig.mode"},
	{Name: "system image", Path: gen, Body: `{"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":""}}]},"contents":[{"parts":[{"text":"x"}]}]}`, Status: 400, Message: "systemInstruction.parts[0]"},
	{Name: "no model", Path: "/v1beta/models/:generateContent", Body: `{"contents":[{"parts":[{"text":"x"}]}]}`, Status: 400, Message: "model is missing"},

	// what other dialects send that Gemini cannot take
	{Name: "n", Dialect: "openai", Body: `{"model":"m","n":3,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'n'"},
	{Name: "file", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`, Status: 400, Message: "\"file\""},
	{Name: "private image", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://private.example/x.png"}}]}]}`, Status: 400, Message: "non-public"},
	{Name: "orphan result", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"tool","tool_call_id":"orphan","content":"x"}]}`, Status: 400, Message: "names no function"},
	{Name: "web search", Dialect: "anthropic", Body: `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "web_search"},
	{Name: "document", Dialect: "anthropic", Body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`, Status: 400, Message: "document"},
	{Name: "mcp", Dialect: "anthropic", Body: `{"model":"m","max_tokens":5,"mcp_servers":[{"type":"url","url":"https://mcp.example.com","name":"docs"}],"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "\"docs\" of type \"mcp\""},

	// what Gemini clients send that other families cannot take: a part
	// of a kind the gateway does not know, and prompt only Gemini holds
	{Name: "unknown part", Provider: "anthropic", Body: `{"contents":[{"parts":[{"text":"hi"}]},{"role":"model","parts":[{"toolCall":{"id":"t"}},{}]},{"parts":[{"text":"more"}]}]}`, Status: 400, Message: "another kind"},
	{Name: "cached content", Provider: "openai", Body: `{"cachedContent":"cachedContents/x","contents":[{"parts":[{"text":"hi"}]}]}`, Status: 400, Message: "cachedContent"},
}
