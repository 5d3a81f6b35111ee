package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Auto cache (the channel option auto_cache, off by default): Anthropic
// reads a prompt from cache only up to a cache_control breakpoint the
// request marks, so a client that marks none (any client of another
// dialect, whose requests are translated, and Anthropic clients that never
// learned) pays the full input price on every turn. With auto_cache the
// provider marks two breakpoints of the four Anthropic allows: the system
// prompt's last block, which caches the tools and the system prompt, and
// the last block of the last message, which caches the conversation so far
// for the next turn to read (Anthropic finds it by looking back from that
// turn's own breakpoint). A request that marks any breakpoint is left as
// it is: its client chose.

// cacheControl marks a cache breakpoint.
type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// cacheable reports whether a block may carry cache_control: thinking
// blocks may not, and an empty text block is refused whatever it carries.
func cacheable(typ, text string) bool {
	switch typ {
	case "thinking", "redacted_thinking":
		return false
	case "text":
		return text != ""
	}
	return true
}

// markCache sets the breakpoints on a translated request (which carries
// none: the neutral form has no breakpoints).
func markCache(w *messagesRequest) {
	mark := func(c *content) {
		if c == nil || len(c.Blocks) == 0 {
			return
		}
		b := &c.Blocks[len(c.Blocks)-1]
		if cacheable(b.Type, b.Text) {
			c.IsString = false
			b.CacheControl = ephemeral
		}
	}
	mark(w.System)
	if n := len(w.Messages); n > 0 {
		mark(&w.Messages[n-1].Content)
	}
}

// markCacheRaw sets the same breakpoints on a client's own body when it
// marks none, keeping every other member byte for byte.
func markCacheRaw(raw []byte) ([]byte, error) {
	if bytes.Contains(raw, []byte(`"cache_control"`)) {
		return raw, nil
	}
	var top struct {
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return raw, nil // the upstream answers a body it cannot read
	}
	var fields []adapters.Field
	if sys, ok := markRawContent(top.System); ok {
		fields = append(fields, adapters.Field{Key: "system", Value: sys})
	}
	if n := len(top.Messages); n > 0 {
		var last map[string]json.RawMessage
		if json.Unmarshal(top.Messages[n-1], &last) == nil {
			if c, ok := markRawContent(last["content"]); ok {
				last["content"] = c
				b, err := json.Marshal(last)
				if err != nil {
					return nil, err
				}
				top.Messages[n-1] = b
				fields = append(fields, adapters.Field{Key: "messages", Value: top.Messages})
			}
		}
	}
	if len(fields) == 0 {
		return raw, nil
	}
	return adapters.SetFields(raw, fields...)
}

// markRawContent marks the last block of a string or an array of blocks.
func markRawContent(raw json.RawMessage) (json.RawMessage, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, false
		}
		b, err := json.Marshal([]map[string]any{{"type": "text", "text": s, "cache_control": ephemeral}})
		return b, err == nil
	}
	// only the last block is decoded and written again; the others keep
	// their bytes
	var blocks []json.RawMessage
	var last map[string]json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil || len(blocks) == 0 || json.Unmarshal(blocks[len(blocks)-1], &last) != nil {
		return nil, false
	}
	var typ, text string
	_ = json.Unmarshal(last["type"], &typ)
	_ = json.Unmarshal(last["text"], &text)
	if !cacheable(typ, text) {
		return nil, false
	}
	last["cache_control"] = json.RawMessage(`{"type":"ephemeral"}`)
	b, err := json.Marshal(last)
	if err != nil {
		return nil, false
	}
	blocks[len(blocks)-1] = b
	b, err = json.Marshal(blocks)
	return b, err == nil
}
