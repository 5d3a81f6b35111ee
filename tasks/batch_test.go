package tasks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
)

func batchLines(bodies ...string) []adapters.BatchLine {
	out := make([]adapters.BatchLine, len(bodies))
	for i, b := range bodies {
		out[i] = adapters.BatchLine{CustomID: string(rune('a' + i)), Body: json.RawMessage(b)}
	}
	return out
}

// A batch reserves each line's prompt (by size) and its output limit,
// whichever field names it, times n; the model's max_output or the
// gateway's default when none does; no output for embeddings.
func TestBatchReservation(t *testing.T) {
	e := New(Config{}, Deps{Engine: &engine.Engine{DefaultMaxTokens: 1000}})
	price := &billing.Price{Input: 1_000_000, Output: 2_000_000} // 1 and 2 units a token
	for _, tc := range []struct {
		name, endpoint, body string
		maxOutput            int64
		wantOut              int64
	}{
		{"max_tokens", "/v1/chat/completions", `{"model":"m","max_tokens":50}`, 0, 50},
		{"max_completion_tokens, n 3", "/v1/chat/completions", `{"model":"m","max_completion_tokens":40,"n":3}`, 0, 120},
		{"max_output_tokens", "/v1/responses", `{"model":"m","max_output_tokens":70}`, 0, 70},
		{"none: max_output", "/v1/chat/completions", `{"model":"m"}`, 300, 300},
		{"none: the default", "/v1/chat/completions", `{"model":"m"}`, 0, 1000},
		{"embeddings", "/v1/embeddings", `{"model":"m","input":"x"}`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *price
			p.MaxOutput = tc.maxOutput
			lines := batchLines(tc.body)
			_, fields, ae := e.checkLines(lines, tc.endpoint)
			if ae != nil {
				t.Fatal(ae)
			}
			want := int64(len(tc.body))/4 + 2*tc.wantOut
			if got := e.reservation(lines, fields, &p, tc.endpoint); got != want {
				t.Fatalf("reserved %d, want %d", got, want)
			}
		})
	}
}

func TestBatchLinesRefused(t *testing.T) {
	e := New(Config{}, Deps{Engine: &engine.Engine{}})
	for _, tc := range []struct {
		lines []adapters.BatchLine
		want  string
	}{
		{nil, "no requests"},
		{[]adapters.BatchLine{{CustomID: "", Body: json.RawMessage(`{"model":"m"}`)}}, "no custom_id"},
		{[]adapters.BatchLine{{CustomID: "x", Body: json.RawMessage(`{"model":"m"}`)}, {CustomID: "x", Body: json.RawMessage(`{"model":"m"}`)}}, "used twice"},
		{batchLines(`{"model":"m"}`, `{"model":"n"}`), "a batch runs one model"},
		{batchLines(`{"messages":[]}`), "names no model"},
		{batchLines(`[1]`), "no JSON object body"},
	} {
		if _, _, ae := e.checkLines(tc.lines, "/v1/chat/completions"); ae == nil || ae.Status != 400 || !strings.Contains(ae.Message, tc.want) {
			t.Fatalf("%v: %v, want a 400 saying %q", tc.lines, ae, tc.want)
		}
	}
}
