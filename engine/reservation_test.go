package engine

import (
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// An image or audio part is counted as a part, not by the size of its data
// or URL.
func TestPromptEstimateCountsPartsNotTheirBytes(t *testing.T) {
	data := make([]byte, 300_000)
	text := strings.Repeat("word ", 100) // 500 bytes
	raw := `{"messages":[{"role":"user","content":[{"type":"text","text":"` + text + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		strings.Repeat("A", len(data)*4/3) + `"}}]}]}`
	req := &adapters.Request{Raw: []byte(raw), Chat: &adapters.ChatRequest{Messages: []adapters.Message{{Role: "user", Parts: []adapters.Part{
		{Type: adapters.PartText, Text: text},
		{Type: adapters.PartImage, Image: &adapters.Image{MediaType: "image/png", Data: data}},
		{Type: "input_audio"},
	}}}}}
	tokens, parts := PromptEstimate(req)
	// about 600 bytes of JSON and text, a quarter token a byte, and two parts
	if parts != 2 || tokens < 100 || tokens > 400 {
		t.Fatalf("estimate %d tokens of text and %d parts, want about 150 and 2", tokens, parts)
	}
}

func TestOutputLimitAndChoices(t *testing.T) {
	n, mt, bo := int64(3), int64(100), int64(5)
	if l, c := OutputLimit(&adapters.Request{Chat: &adapters.ChatRequest{N: &n}}); l != 0 || c != 3 {
		t.Fatalf("chat n=3: %d %d", l, c)
	}
	if l, c := OutputLimit(&adapters.Request{Completion: &adapters.CompletionRequest{MaxTokens: &mt, Choices: &bo}}); l != 100 || c != 5 {
		t.Fatalf("completion best_of=5: %d %d", l, c)
	}
	huge := int64(1 << 40)
	if _, c := OutputLimit(&adapters.Request{Chat: &adapters.ChatRequest{N: &huge}}); c != MaxChoices {
		t.Fatalf("absurd n: %d", c)
	}
}
