package tokenizer

import (
	"strings"
	"testing"
)

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

// TestLongRunIsLinear: a megabyte of one letter is counted without the
// quadratic cost of one huge BPE piece (the test binary's timeout is the
// bound: this took minutes before), and a count of about a token per few
// bytes comes back; short text counts exactly as before.
func TestLongRunIsLinear(t *testing.T) {
	n := Count("gpt-4o", strings.Repeat("a", 1<<20))
	if n < (1<<20)/64 || n > 1<<20 {
		t.Fatalf("1 MB of one letter counted as %d tokens", n)
	}
	if got := Count("gpt-4o", "hello world"); got != 2 {
		t.Fatalf("hello world = %d tokens, want 2", got)
	}
	if n := Count("gpt-4o", "a"+strings.Repeat(" ", 1<<20)+"b"); n < 2 || n > 1<<20 {
		t.Fatalf("a megabyte of spaces counted as %d tokens", n)
	}
	long := strings.Repeat("x", 100) + " tail"
	if got := Count("gpt-4o", long); got <= Count("gpt-4o", " tail") {
		t.Fatalf("a long run then text = %d", got)
	}
}
