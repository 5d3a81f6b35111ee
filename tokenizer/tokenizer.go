// Package tokenizer counts tokens offline with tiktoken-compatible
// encodings, for upstreams that report no usage. The BPE tables are compiled
// into the binary (tiktoken-go-loader), so counting never touches the network.
// It must not import caddymodule, store or any vendor adapter.
package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

var (
	loaderOnce sync.Once
	mu         sync.Mutex
	encodings  = map[string]*tiktoken.Tiktoken{}
)

// EncodingFor picks the encoding a model family uses: o200k_base for the
// GPT-4o/4.1/5 and o-series families, cl100k_base for everything else, which
// is also a fair estimate for models whose own tokenizer is not public.
func EncodingFor(model string) string {
	m := strings.ToLower(model)
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss"} {
		if strings.HasPrefix(m, p) {
			return "o200k_base"
		}
	}
	return "cl100k_base"
}

func encoding(name string) (*tiktoken.Tiktoken, error) {
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	mu.Lock()
	defer mu.Unlock()
	if enc, ok := encodings[name]; ok {
		return enc, nil
	}
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		return nil, err
	}
	encodings[name] = enc
	return enc, nil
}

// Count returns the number of tokens text has in the model's encoding.
// Special-token text is counted as ordinary text, since it came from a user.
// If the encoding cannot load it falls back to one token per four bytes.
func Count(model, text string) int64 {
	if text == "" {
		return 0
	}
	enc, err := encoding(EncodingFor(model))
	if err != nil {
		return int64(len(text)+3) / 4
	}
	// BPE merges are quadratic in a piece's length, so a long run without
	// spaces (a megabyte of one letter) is counted in slices of maxRun
	// bytes: a count a little above the exact one, in linear time
	var n int64
	for len(text) > 0 {
		plain, run, rest := nextLongRun(text)
		if plain != "" {
			n += int64(len(enc.EncodeOrdinary(plain)))
		}
		for len(run) > 0 {
			cut := min(maxRun, len(run))
			for cut < len(run) && !utf8.RuneStart(run[cut]) {
				cut++
			}
			n += int64(len(enc.EncodeOrdinary(run[:cut])))
			run = run[cut:]
		}
		text = rest
	}
	return n
}

// maxRun is the longest run of non-space bytes encoded in one piece.
const maxRun = 64

// nextLongRun splits text into what comes before its first run of more
// than maxRun bytes of one kind (spaces, or anything else: both are single
// pieces to the encoder), that run, and the rest.
func nextLongRun(text string) (plain, run, rest string) {
	start, space := 0, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		sp := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if i == 0 || sp != space {
			if i-start > maxRun {
				return text[:start], text[start:i], text[i:]
			}
			start, space = i, sp
		}
	}
	if len(text)-start > maxRun {
		return text[:start], text[start:], ""
	}
	return text, "", ""
}

// Per-message overhead of OpenAI's chat format: every message is wrapped in
// <|start|>{role}\n ... <|end|>, and the reply is primed with three tokens.
const (
	tokensPerMessage = 3
	tokensReplyPrime = 3
)

// CountChat estimates the prompt tokens of a chat: each message's text plus
// the chat format's fixed overhead.
func CountChat(model string, messages []string) int64 {
	var n int64
	for _, m := range messages {
		n += tokensPerMessage + Count(model, m)
	}
	return n + tokensReplyPrime
}
