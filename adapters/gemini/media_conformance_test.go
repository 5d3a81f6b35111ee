package gemini_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestMediaConformance checks image generations and edits behind OpenAI's
// images shape against the fixtures under testdata/media: Imagen through
// :predict, Gemini image models through generateContent, the images to
// edit inline, and what Gemini cannot do (URLs, masks, Imagen edits)
// refused before any call.
func TestMediaConformance(t *testing.T) {
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		Name:      "gemini",
		KeyHeader: "x-goog-api-key",
		Images:    true, ImageEdits: true,
	})
}
