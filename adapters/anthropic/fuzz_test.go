package anthropic_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// FuzzDecodeRequest: no client body makes the decoder or the translations
// that follow it panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":null}]}`))
	adaptertest.FuzzDecodeRequest(f, "anthropic")
}

// FuzzStreamDecoder: no upstream stream makes the decoder, or any dialect's
// encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	adaptertest.FuzzStreamDecoder(f, "anthropic")
}
