package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// FuzzDecodeRequest: no client body makes the decoder, or the upstream
// request built from what it decoded, panic; every refusal is an
// *adapters.Error. Each body goes to every path in testdata/openai.http
// (chat, legacy completions, both embeddings paths).
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":null},{"role":"tool","name":"f","content":[{"type":"image_url","image_url":{"url":"data:;base64,"}}]}]}`))
	f.Add([]byte(`{"model":"m","prompt":["a"],"stream":true,"stream_options":null}`))
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]],"encoding_format":"base64","dimensions":8}`))
	f.Add([]byte(`{"input":"model"}`))
	adaptertest.FuzzDecodeRequest(f, "openai")
}

// FuzzStreamDecoder: no upstream stream makes the decoder, in passthrough or
// translation mode, or any dialect's encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}}],\"usage\":{\"total_tokens\":9}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": keep-alive\n\nevent: x\n\ndata: {\"error\":{}}\n\n"))
	adaptertest.FuzzStreamDecoder(f, "openai")
}
