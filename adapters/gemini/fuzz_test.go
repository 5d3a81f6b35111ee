package gemini_test

import (
	"context"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

// FuzzDecodeRequest: no client body makes the decoder or the translations
// that follow it panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"contents":[{"parts":[{"thoughtSignature":"Y2FkZHktbW9kZWwtZ2F0ZXdheTo="}]}]}`))
	restore := gemini.SetFetchImage(func(context.Context, string) (*adapters.Image, error) {
		return &adapters.Image{MediaType: "image/png", Data: []byte("x")}, nil
	})
	defer restore()
	adaptertest.FuzzDecodeRequest(f, "gemini")
}

// FuzzStreamDecoder: no upstream stream makes the decoder, or any dialect's
// encoder fed from it, panic.
func FuzzStreamDecoder(f *testing.F) {
	adaptertest.FuzzStreamDecoder(f, "gemini")
}
