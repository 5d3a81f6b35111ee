package openaicompat_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// OpenRouter's stream step (its error chunks) and error envelopes, fuzzed
// from its fixtures; the other presets share its code but the tables.
func FuzzOpenRouterStream(f *testing.F) {
	adaptertest.FuzzStreamDecoderIn(f, "openrouter", "testdata/openrouter")
}

func FuzzZhipuStream(f *testing.F) {
	adaptertest.FuzzStreamDecoderIn(f, "zhipu", "testdata/zhipu")
}
