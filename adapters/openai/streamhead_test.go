package openai_test

import (
	"errors"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// A chunk is an upstream's error when it has a top-level error member,
// however spaced and wherever it stands, and its usage is read however
// spaced; words in the answer's text are neither.
func TestStreamChunkErrorAndUsage(t *testing.T) {
	for _, c := range []struct {
		name, data string
		err        string // the upstream's message, "" for none
		prompt     int64  // the usage's prompt tokens, 0 for none
	}{
		{"compact error", `{"error":{"message":"boom","type":"server_error"}}`, "boom", 0},
		{"spaced error", `{ "error": { "message": "boom", "type": "server_error" } }`, "boom", 0},
		{"error after the id (OpenRouter)", `{"id": "c1", "object": "chat.completion.chunk", "error": {"code": "server_error", "message": "Provider disconnected"}, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}`, "Provider disconnected", 0},
		{"null error", `{"id": "c1", "error": null, "choices": []}`, "", 0},
		{"empty error", `{"id": "c1", "error": "", "choices": []}`, "", 0},
		{"empty error object", `{"id": "c1", "error": {}, "choices": []}`, "", 0},
		{"error in the text", `{"id": "c1", "choices": [{"index": 0, "delta": {"content": "{\"error\": {\"message\": \"x\"}, \"usage\": {\"prompt_tokens\": 5}}"}}]}`, "", 0},
		{"nested error", `{"id": "c1", "choices": [{"index": 0, "delta": {"error": {"message": "x"}}}]}`, "", 0},
		{"spaced usage", `{"id": "c1", "choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}}`, "", 1200},
		{"usage first", `{"usage" : {"prompt_tokens" : 7, "completion_tokens" : 1}, "id": "c1", "choices": []}`, "", 7},
		{"usage null", `{"id": "c1", "choices": [], "usage": null}`, "", 0},
	} {
		step := openai.Adapter{}.NewStreamStep(&adapters.Request{Op: adapters.OpChat})
		u, _, err := step.Probe(&adapters.SSEEvent{Data: []byte(c.data)})
		var ue *adapters.Error
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: an error %v", c.name, err)
		case c.err != "" && (!errors.As(err, &ue) || ue.Message != c.err):
			t.Errorf("%s: error %v, want the upstream's %q", c.name, err, c.err)
		}
		var prompt int64
		if u != nil {
			prompt = u.PromptTokens
		}
		if prompt != c.prompt {
			t.Errorf("%s: usage %+v, want %d prompt tokens", c.name, u, c.prompt)
		}
		// Translate agrees
		if _, _, terr := (openai.Adapter{}).NewStreamStep(&adapters.Request{Op: adapters.OpChat}).Translate(nil, &adapters.SSEEvent{Data: []byte(c.data)}); (terr != nil) != (c.err != "") {
			t.Errorf("%s: translated: %v", c.name, terr)
		}
	}
}
