package tokenizer

import "testing"

func TestCount(t *testing.T) {
	tests := []struct {
		model, text string
		want        int64
	}{
		// Reference counts from OpenAI's tiktoken for these encodings.
		{"gpt-4o-mini", "hello world", 2},
		{"gpt-4o", "Hello, world!", 4},
		{"gpt-3.5-turbo", "hello world", 2},
		{"text-embedding-3-small", "The quick brown fox jumps over the lazy dog.", 10},
		{"gpt-4o", "", 0},
		{"gpt-4o", "<|endoftext|>", 7},
	}
	for _, tt := range tests {
		if got := Count(tt.model, tt.text); got != tt.want {
			t.Errorf("Count(%q, %q) = %d, want %d", tt.model, tt.text, got, tt.want)
		}
	}
}

func TestEncodingFor(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o-mini":            "o200k_base",
		"o3-mini":                "o200k_base",
		"gpt-4":                  "cl100k_base",
		"claude-sonnet-4-6":      "cl100k_base",
		"text-embedding-3-small": "cl100k_base",
	} {
		if got := EncodingFor(model); got != want {
			t.Errorf("EncodingFor(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestCountChat(t *testing.T) {
	// two messages of two tokens each: 2*(3+2) + 3
	if got := CountChat("gpt-4o", []string{"hello world", "hello world"}); got != 13 {
		t.Fatalf("CountChat = %d, want 13", got)
	}
}
