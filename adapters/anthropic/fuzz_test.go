package anthropic_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

func seeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
}

// FuzzDecodeRequest: no client body makes the decoder or the translations
// that follow it panic.
func FuzzDecodeRequest(f *testing.F) {
	seeds(f, "testdata/decode/*.json")
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, op := range []adapters.Operation{adapters.OpChat, adapters.OpCountTokens} {
			req, err := ant.DecodeRequest(op, body, post("/v1/messages", "anthropic-version", "2023-06-01"))
			if err != nil {
				if _, ok := err.(*adapters.Error); !ok {
					t.Fatalf("decode error is not an *adapters.Error: %v", err)
				}
				continue
			}
			_, _ = anthropic.EncodeChatRequest(req, "m")
			_, _ = anthropic.EncodeCountTokensRequest(req, "m")
			_, _ = openai.EncodeChatRequest(req, "m")
		}
	})
}

// FuzzStreamDecoder: no upstream stream makes the decoder, or any dialect's
// encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	seeds(f, "testdata/stream/*.anthropic.sse")
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, d := range []adapters.Dialect{ant, oai, gem} {
			req := &adapters.Request{Op: adapters.OpChat, Dialect: d.Name(), Model: "m", Stream: true, IncludeUsage: true}
			dec := providerOf(ant).NewStreamDecoder(req, bytes.NewReader(stream))
			enc := d.NewStreamEncoder(req)
			var out []byte
			for i := 0; i < 10000; i++ {
				ev, err := dec.Next()
				if err != nil {
					break
				}
				out = enc.Encode(out, ev)
			}
			out = enc.Finish(out)
			_ = enc.Error(out, &adapters.Error{Status: 500, Message: "x"})
		}
		_, _ = providerOf(ant).DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: "openai"}, stream)
		_ = providerOf(ant).DecodeError(500, stream)
	})
}
