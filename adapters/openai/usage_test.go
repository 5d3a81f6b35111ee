package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// usageCases are usage objects and stream chunks in the shapes upstreams
// send and the ones decodeUsage leaves to encoding/json.
var usageCases = []string{
	`{"prompt_tokens":9,"completion_tokens":231,"total_tokens":240}`,
	`{"prompt_tokens":9,"completion_tokens":231,"total_tokens":240,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":7,"accepted_prediction_tokens":0}}`,
	` { "prompt_tokens" : 1 , "completion_tokens" : 2 } `,
	`null`,
	`{}`,
	`{"prompt_tokens":-4}`,
	`{"prompt_tokens":1.0}`,
	`{"prompt_tokens":1e3}`,
	`{"prompt_tokens":01}`,
	`{"prompt_tokens":"9"}`,
	`{"prompt_tokens":null,"completion_tokens":2}`,
	`{"prompt_tokens":99999999999999999999}`,
	`{"Prompt_Tokens":5}`,
	`{"prompt_tokens":5,"PROMPT_TOKENS":6}`,
	`{"prompt_tokens":5,"prompt_tokens":6}`,
	`{"prompt_tokens_details":null}`,
	`{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"other":1}}`,
	`{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":null}`,
	`{"prompt_tokens_details":{"Cached_Tokens":2}}`,
	`{"prompt_tokens_details":[1]}`,
	`{"completion_tokens_details":{"reasoning_tokens":true}}`,
	`{"pro\u006dpt_tokens":8}`,
	`{"extra":{"nested":[1,2,{"a":"b"}]},"completion_tokens":3}`,
	`{"extra":tru,"completion_tokens":3}`,
	`{"prompt_tokens":1,}`,
	`{"prompt_tokens":1`,
	`[1]`,
	`"usage"`,
	``,
	`{"prompt_tokens":1}x`,
	`{"extra":-{},"prompt_tokens":1}`,
	`{"extra":{"a":-,"b":2}}`,
	`{"prompt_tokens_details":{"x":{"y":1}}}`,
	`{"extra":{"a":{"b":1}}}`,
	`{"prompt_tokens":-}`,
	`{"prompt_tokens":1 2}`,
}

// decodeUsage, with encoding/json as its fallback, agrees with
// json.Unmarshal on every case: the same value and the same success.
func TestDecodeUsageAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range usageCases {
		for _, start := range []*usage{nil, {PromptTokens: 1, PromptTokensDetails: &promptDetails{CachedTokens: 4}}} {
			checkUsageAgrees(t, c, start)
		}
	}
}

func checkUsageAgrees(t *testing.T, raw string, start *usage) {
	t.Helper()
	want, got := clone(start), clone(start)
	wantErr := json.Unmarshal([]byte(raw), &want) != nil
	gotErr := false
	if !decodeUsage([]byte(raw), &got) {
		if !reflect.DeepEqual(got, clone(start)) {
			t.Fatalf("%s: a refused decode changed its destination to %+v", raw, got)
		}
		gotErr = json.Unmarshal([]byte(raw), &got) != nil
	}
	if gotErr != wantErr || !wantErr && !reflect.DeepEqual(got, want) {
		t.Errorf("%s (from %+v): got %+v (error %v), encoding/json %+v (error %v)", raw, start, got, gotErr, want, wantErr)
	}
}

func clone(u *usage) *usage {
	if u == nil {
		return nil
	}
	c := *u
	if u.PromptTokensDetails != nil {
		d := *u.PromptTokensDetails
		c.PromptTokensDetails = &d
	}
	if u.CompletionTokensDetails != nil {
		d := *u.CompletionTokensDetails
		c.CompletionTokensDetails = &d
	}
	return &c
}

// chunkUsage reads a stream chunk's usage as json.Unmarshal into
// usageOnly does, duplicate and case-folded members included.
func TestChunkUsageAgreesWithEncodingJSON(t *testing.T) {
	chunks := []string{
		`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":231,"total_tokens":240}}`,
		`{"id":"c","choices":[{"delta":{"content":"hi"}}],"usage":null}`,
		`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`,
		`{"usage":{"prompt_tokens":1},"Usage":{"completion_tokens":2}}`,
		`{"usage":{"prompt_tokens":1},"usage":null}`,
		`{"usage":{"prompt_tokens":1.5}}`,
		`{"usage":{"prompt_tokens":1}} trailing`,
		`{"choices":[}`,
	}
	for _, c := range append(chunks, usageCases...) {
		var want usageOnly
		wantValid := json.Unmarshal([]byte(c), &want) == nil
		got, valid := chunkUsage([]byte(c))
		if valid != wantValid || wantValid && !reflect.DeepEqual(got, want.Usage) {
			t.Errorf("%s: got %+v (valid %v), encoding/json %+v (valid %v)", c, got, valid, want.Usage, wantValid)
		}
	}
}

func FuzzDecodeUsage(f *testing.F) {
	for _, c := range usageCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkUsageAgrees(t, raw, nil)
		var want usageOnly
		wantValid := json.Unmarshal([]byte(raw), &want) == nil
		got, valid := chunkUsage([]byte(raw))
		if valid != wantValid || wantValid && !reflect.DeepEqual(got, want.Usage) {
			t.Errorf("%q: chunkUsage %+v (valid %v), encoding/json %+v (valid %v)", raw, got, valid, want.Usage, wantValid)
		}
	})
}

// The shapes upstreams send are read without encoding/json: the point of
// decodeUsage.
func TestDecodeUsageReadsUpstreamShapes(t *testing.T) {
	for _, c := range usageCases[:5] {
		var u *usage
		if !decodeUsage([]byte(c), &u) {
			t.Errorf("%s: left to encoding/json", c)
		}
	}
	u, _ := chunkUsage([]byte(`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens_details":{"reasoning_tokens":2}}}`))
	if u == nil || u.PromptTokens != 9 || u.CompletionTokensDetails == nil || u.CompletionTokensDetails.ReasoningTokens != 2 {
		t.Errorf("chunk usage: %+v", u)
	}
}

// BenchmarkUsage compares decodeUsage with encoding/json on an answer's
// usage object.
func BenchmarkUsage(b *testing.B) {
	raw := []byte(usageCases[1])
	b.Run("decodeUsage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var u *usage
			if !decodeUsage(raw, &u) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var u *usage
			if err := json.Unmarshal(raw, &u); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProbe is the passthrough cost of a stream's chunks: the
// usage fixture's, compact and spaced, per chunk.
func BenchmarkProbe(b *testing.B) {
	for _, name := range []string{"usage", "spaced_usage"} {
		stream, err := os.ReadFile(filepath.Join("testdata", "stream", name+".openai.sse"))
		if err != nil {
			b.Fatal(err)
		}
		var events []*adapters.SSEEvent
		for _, frame := range bytes.Split(bytes.TrimSpace(stream), []byte("\n\n")) {
			data := bytes.TrimPrefix(frame, []byte("data: "))
			events = append(events, &adapters.SSEEvent{Data: data, Raw: frame})
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				step := Adapter{}.NewStreamStep(&adapters.Request{Op: adapters.OpChat})
				for _, ev := range events {
					if _, _, err := step.Probe(ev); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/chunk")
		})
	}
}
