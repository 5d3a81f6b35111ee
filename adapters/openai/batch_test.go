package openai

import (
	"reflect"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func TestParseBatchResult(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       adapters.BatchResult
	}{
		{"chat", `{"id":"batch_req_1","custom_id":"a","response":{"status_code":200,"request_id":"r","body":{"object":"chat.completion","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}},"error":null}`,
			adapters.BatchResult{CustomID: "a", Succeeded: true, Status: 200, Usage: adapters.Usage{PromptTokens: 12, CompletionTokens: 5, CachedTokens: 4, ReasoningTokens: 2}}},
		{"embeddings", `{"custom_id":"b","response":{"status_code":200,"body":{"object":"list","usage":{"prompt_tokens":9,"total_tokens":9}}}}`,
			adapters.BatchResult{CustomID: "b", Succeeded: true, Status: 200, Usage: adapters.Usage{PromptTokens: 9}}},
		{"responses", `{"custom_id":"c","response":{"status_code":200,"body":{"object":"response","usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3}}}}}`,
			adapters.BatchResult{CustomID: "c", Succeeded: true, Status: 200, Usage: adapters.Usage{PromptTokens: 30, CompletionTokens: 7, CachedTokens: 10, ReasoningTokens: 3}}},
		{"a refused line", `{"custom_id":"d","response":{"status_code":400,"body":{"error":{"message":"bad model","type":"invalid_request_error"}}},"error":null}`,
			adapters.BatchResult{CustomID: "d", Status: 400, Error: "bad model", ErrorLine: true}},
		{"expired, no response", `{"custom_id":"e","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`,
			adapters.BatchResult{CustomID: "e", Status: 500, Error: "batch_expired: This request could not be executed before the completion window expired.", ErrorLine: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBatchResult([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			got.Line = nil
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, tc.want)
			}
		})
	}
	if _, err := ParseBatchResult([]byte(`not json`)); err == nil {
		t.Fatal("a line that is not JSON was read")
	}
}
