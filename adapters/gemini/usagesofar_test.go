package gemini_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

// A stream cut after Gemini's hidden thinking knows the thoughts its
// chunks counted (thoughtsTokenCount, in every chunk once the thinking is
// done), passthrough or translated: a client that leaves then is billed
// them, not the visible text alone.
func TestUsageSoFarCountsHiddenThoughts(t *testing.T) {
	stream, err := os.ReadFile(filepath.Join("testdata", "stream", "truncated_thinking.gemini.sse"))
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Usage{PromptTokens: 11, CompletionTokens: 5 + 1263, ReasoningTokens: 1263}
	for _, dialect := range []string{gemini.Name, "openai"} {
		req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}
		dec := adapters.DecodeStream(gemini.Adapter{}, req, bytes.NewReader(stream))
		var last *adapters.Usage
		for {
			ev, err := dec.Next()
			if err != nil {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%s: %v", dialect, err)
				}
				break
			}
			if ev.Usage != nil {
				u := *ev.Usage
				last = &u
			}
		}
		if got := dec.UsageSoFar(); got == nil || *got != want {
			t.Errorf("%s: usage so far %+v, want %+v", dialect, got, want)
		}
		// passthrough: the chunks' counts are relayed as usage, so the
		// text before them is not counted a second time
		if dialect == gemini.Name && (last == nil || *last != want) {
			t.Errorf("passthrough usage %+v, want %+v", last, want)
		}
		dec.Release()
	}
}
