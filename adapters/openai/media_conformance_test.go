package openai_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestMediaConformance checks OpenAI's images and audio endpoints against
// the fixtures under testdata/media: generations and speech passed
// through but for the model, edits and transcriptions re-sent part by part
// from the spool, answers metered as they stream and rendered in the
// format the client asked for.
func TestMediaConformance(t *testing.T) {
	adaptertest.RunMedia(t, adaptertest.MediaSuite{
		Name:      "openai",
		KeyHeader: "Authorization",
		Images:    true, ImageEdits: true, Speech: true, Transcriptions: true,
	})
}
