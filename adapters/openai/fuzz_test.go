package openai_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
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

// FuzzDecodeRequest: no client body makes the decoder, or the upstream
// request built from what it decoded, panic; every refusal is an
// *adapters.Error.
func FuzzDecodeRequest(f *testing.F) {
	seeds(f, "testdata/decode/*.json")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":null},{"role":"tool","name":"f","content":[{"type":"image_url","image_url":{"url":"data:;base64,"}}]}]}`))
	f.Add([]byte(`{"model":"m","prompt":["a"],"stream":true,"stream_options":null}`))
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]],"encoding_format":"base64","dimensions":8}`))
	f.Add([]byte(`{"input":"model"}`))
	up := &adapters.Upstream{Channel: "fuzz", BaseURL: "http://127.0.0.1:1", Key: "k", Model: "upstream-model"}
	ops := []struct {
		op   adapters.Operation
		path string
	}{
		{adapters.OpChat, "/v1/chat/completions"},
		{adapters.OpCompletion, "/v1/completions"},
		{adapters.OpEmbedding, "/v1/embeddings"},
		{adapters.OpEmbedding, "/v1/engines/fuzz/embeddings"},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, o := range ops {
			req, err := oai.DecodeRequest(o.op, body, post(o.path))
			if err != nil {
				var e *adapters.Error
				if !errors.As(err, &e) || e.Status != 400 {
					t.Fatalf("%s: decode error is not a 400 *adapters.Error: %#v", o.op, err)
				}
				continue
			}
			// passthrough, with the model kept and replaced
			for _, model := range []string{req.Model, up.Model} {
				up := *up
				up.Model = model
				if _, err := prov.NewRequest(context.Background(), &up, req); err != nil {
					t.Fatalf("%s: passthrough of a decoded body failed: %v", o.op, err)
				}
			}
			// translation, as if another dialect had decoded it
			if req.Op == adapters.OpChat {
				req.Dialect = "anthropic"
				_, _ = prov.NewRequest(context.Background(), up, req)
				_, _ = openai.EncodeChatRequest(req, "m")
			}
		}
	})
}

// FuzzStreamDecoder: no upstream stream makes the decoder, in passthrough or
// translation mode, or the OpenAI encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	seeds(f, "testdata/stream/*.sse")
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}}],\"usage\":{\"total_tokens\":9}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": keep-alive\n\nevent: x\n\ndata: {\"error\":{}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, dialect := range []string{openai.Name, "anthropic"} {
			for _, includeUsage := range []bool{false, true} {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Model: "m", Stream: true, IncludeUsage: includeUsage}
				dec := prov.NewStreamDecoder(req, bytes.NewReader(stream))
				enc := oai.NewStreamEncoder(req)
				var out []byte
				for i := 0; ; i++ {
					if i > len(stream)+10 {
						t.Fatalf("%s: the decoder does not end", dialect)
					}
					ev, err := dec.Next()
					if err != nil {
						break
					}
					out = enc.Encode(out, ev)
				}
				out = enc.Finish(out)
				_ = enc.Error(out, &adapters.Error{Status: 502, Message: "x"})
				if pt, ok := dec.(adapters.PartialText); ok {
					_ = pt.PartialText()
				}
			}
		}
		req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Model: "m"}
		if resp, err := prov.DecodeResponse(req, stream); err == nil {
			_, _ = oai.EncodeResponse(req, resp)
		}
		_ = prov.DecodeError(500, stream)
	})
}
