package gemini_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
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
	f.Add([]byte(`{"contents":[{"parts":[{"thoughtSignature":"Y2FkZHktbW9kZWwtZ2F0ZXdheTo="}]}]}`))
	restore := gemini.SetFetchImage(func(context.Context, string) (*adapters.Image, error) {
		return &adapters.Image{MediaType: "image/png", Data: []byte("x")}, nil
	})
	defer restore()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1beta/models/g:generateContent", "/v1/models/g:countTokens"} {
			op := adapters.OpChat
			if bytes.HasSuffix([]byte(path), []byte("countTokens")) {
				op = adapters.OpCountTokens
			}
			req, err := gem.DecodeRequest(op, body, post(path))
			if err != nil {
				if _, ok := err.(*adapters.Error); !ok {
					t.Fatalf("decode error is not an *adapters.Error: %v", err)
				}
				continue
			}
			_, _ = gemini.EncodeRequest(context.Background(), req)
			_, _ = gemini.EncodeCountTokensRequest(context.Background(), req, "g")
			_, _ = anthropic.EncodeChatRequest(req, "m")
			_, _ = openai.EncodeChatRequest(req, "m")
		}
	})
}

// FuzzStreamDecoder: no upstream stream makes the decoder, or any dialect's
// encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	seeds(f, "testdata/stream/*.gemini.sse")
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, d := range []adapters.Dialect{gem, oai, ant} {
			req := &adapters.Request{Op: adapters.OpChat, Dialect: d.Name(), Model: "m", Stream: true, IncludeUsage: true}
			dec := providerOf(gem).NewStreamDecoder(req, bytes.NewReader(stream))
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
		_, _ = providerOf(gem).DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: "openai"}, stream)
		_ = providerOf(gem).DecodeError(500, stream)
	})
}
