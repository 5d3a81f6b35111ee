package anthropic

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
		{"succeeded", `{"custom_id":"a","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":7}}}}`,
			adapters.BatchResult{CustomID: "a", Succeeded: true, Status: 200, Usage: adapters.Usage{PromptTokens: 35, CompletionTokens: 7, CachedTokens: 20, CacheWriteTokens: 5}}},
		{"errored", `{"custom_id":"b","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}}}`,
			adapters.BatchResult{CustomID: "b", Status: 400, Error: "invalid_request_error: max_tokens: Field required"}},
		{"canceled", `{"custom_id":"c","result":{"type":"canceled"}}`,
			adapters.BatchResult{CustomID: "c", Status: 408, Error: "the request was canceled before it ran"}},
		{"expired", `{"custom_id":"d","result":{"type":"expired"}}`,
			adapters.BatchResult{CustomID: "d", Status: 408, Error: "the request was expired before it ran"}},
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
	if _, err := ParseBatchResult([]byte(`{"custom_id":"x","result":{"type":"mystery"}}`)); err == nil {
		t.Fatal("a result of an unknown type was read")
	}
}
