package engine

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func TestDeterministic(t *testing.T) {
	zero, warm := 0.0, 0.7
	seed := int64(3)
	chat := func(c adapters.ChatRequest) *adapters.Request {
		return &adapters.Request{Op: adapters.OpChat, Chat: &c}
	}
	cases := []struct {
		name string
		req  *adapters.Request
		want bool
	}{
		{"temperature 0", chat(adapters.ChatRequest{Temperature: &zero}), true},
		{"a seed", chat(adapters.ChatRequest{Temperature: &warm, Seed: &seed}), true},
		{"sampled", chat(adapters.ChatRequest{Temperature: &warm}), false},
		{"the vendor's default temperature", chat(adapters.ChatRequest{}), false},
		{"a function tool", chat(adapters.ChatRequest{Temperature: &zero, Tools: []adapters.Tool{{Type: "function", Name: "f"}}}), true},
		{"a hosted tool", chat(adapters.ChatRequest{Temperature: &zero, Tools: []adapters.Tool{{Type: "web_search"}}}), false},
		{"state at the vendor", &adapters.Request{Op: adapters.OpResponses, Chat: &adapters.ChatRequest{Temperature: &zero},
			Untranslatable: []*adapters.Error{adapters.BadRequest("previous_response_id")}}, false},
		{"an embedding", &adapters.Request{Op: adapters.OpEmbedding}, true},
		{"a rerank", &adapters.Request{Op: adapters.OpRerank}, true},
		{"a completion at 0", &adapters.Request{Op: adapters.OpCompletion, Raw: []byte(`{"prompt":"x","temperature":0}`)}, true},
		{"a completion with a seed", &adapters.Request{Op: adapters.OpCompletion, Raw: []byte(`{"prompt":"x","seed":1}`)}, true},
		{"a sampled completion", &adapters.Request{Op: adapters.OpCompletion, Raw: []byte(`{"prompt":"x","seed":null}`)}, false},
	}
	for _, tc := range cases {
		if got := Deterministic(tc.req); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
