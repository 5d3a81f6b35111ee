package openai

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// threeSearches is what Probe searched for before markChunk: head's,
// finishEnd's and the usage's searches, one after the other.
func threeSearches(data []byte) chunkMarks {
	return chunkMarks{
		err:   adapters.NamesMember(data, errorKey, `{"`),
		end:   finishEnd(data),
		usage: adapters.NamesMember(data, usageKey, "{"),
	}
}

var markCases = []string{
	`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`,
	`{"id":"c","choices":[],"usage":{"prompt_tokens":1}}`,
	`{"id":"c","choices":[{"delta":{},"finish_reason":"stop"}]}`,
	`{"choices":[{"finish_reason" : "error"}], "error" : {"message":"x"}}`,
	`{"finish_reason":null,"x":{"finish_reason":"stop"}}`,
	`{"error":"","usage" :	{}, "finish_reason":` + "\n" + `"length"}`,
	`{"content":"\"usage\":{\"a\":1} \"error\":\"x\""}`,
	`"usage"`, `"`, `"u`, `"usage":`, `"error" :`, `{"errors":{},"usages":{},"finish_reasons":"x"}`,
	`{"usage":"x","error":null,"usage":{}}`,
	``,
}

// TestMarkChunkFindsWhatTheSearchesFind: one pass finds what the three
// searches found, on the stream fixtures' chunks and odd ones.
func TestMarkChunkFindsWhatTheSearchesFind(t *testing.T) {
	chunks := markCases
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, frame := range bytes.Split(b, []byte("\n\n")) {
			chunks = append(chunks, string(bytes.TrimPrefix(bytes.TrimSpace(frame), []byte("data: "))))
		}
	}
	if len(chunks) < 50 {
		t.Fatalf("only %d chunks", len(chunks))
	}
	for _, c := range chunks {
		if got, want := markChunk([]byte(c)), threeSearches([]byte(c)); got != want {
			t.Errorf("%s: %+v, the searches %+v", c, got, want)
		}
	}
}

func FuzzMarkChunk(f *testing.F) {
	for _, c := range markCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := markChunk(data), threeSearches(data); got != want {
			t.Fatalf("%q: %+v, the searches %+v", data, got, want)
		}
	})
}

// BenchmarkMarkChunk: the fixture's chunks searched in one pass and in three.
func BenchmarkMarkChunk(b *testing.B) {
	stream, err := os.ReadFile(filepath.Join("testdata", "stream", "usage.openai.sse"))
	if err != nil {
		b.Fatal(err)
	}
	var chunks [][]byte
	for _, frame := range bytes.Split(bytes.TrimSpace(stream), []byte("\n\n")) {
		chunks = append(chunks, bytes.TrimPrefix(frame, []byte("data: ")))
	}
	for _, fn := range []struct {
		name string
		f    func([]byte) chunkMarks
	}{{"one_pass", markChunk}, {"three_searches", threeSearches}} {
		b.Run(fn.name, func(b *testing.B) {
			for b.Loop() {
				for _, c := range chunks {
					fn.f(c)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
		})
	}
}
