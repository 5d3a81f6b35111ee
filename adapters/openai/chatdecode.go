package openai

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// decodeChat decodes a chat request body into w. Every chat request passes
// here, and encoding/json's reflection costs several microseconds for even
// a short one, so the common shapes are read by hand: readChat fills w
// exactly as json.Unmarshal would, or gives up at the first thing it does
// not read exactly as encoding/json would (an escaped or case-folded key,
// a repeated key, a type encoding/json refuses, a field it does not know),
// and json.Unmarshal decodes the body instead, with its own errors.
// A body that is not valid JSON never takes the hand-read path, so every
// error is still worded by encoding/json.
func decodeChat(body []byte, w *chatRequest) error {
	if json.Valid(body) {
		r := jsonReader{b: body, ok: true}
		if r.chat(w); r.ok {
			return nil
		}
		*w = chatRequest{}
	}
	return adapters.DecodeJSON(body, w)
}

// jsonReader reads a document json.Valid has accepted: it checks no
// syntax, only whether a value is of the kind its field takes. ok turns
// false at the first thing it does not read exactly as json.Unmarshal
// would, and every method is then a no-op.
type jsonReader struct {
	b  []byte
	i  int
	ok bool
	// s is b as a string once a message's string is read: each plain one
	// is a slice of it, one allocation for all of them (the conversation
	// is most of a request's bytes, and encoding/json copies each string).
	// Only the messages' strings share it: they live as long as the
	// request, where a top-level one (the model, the user) may be kept.
	s string
}

func (r *jsonReader) fail() { r.ok = false }

func (r *jsonReader) next() byte {
	for r.i < len(r.b) {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

// null consumes a null literal if one is next.
func (r *jsonReader) null() bool {
	if r.next() == 'n' {
		r.i += len("null")
		return true
	}
	return false
}

// object reads an object's members, calling member with each key (its
// bytes between the quotes) and the reader at its value, which member
// must consume. known names the keys the object's struct has: a key that
// matches one only when case is folded, or is escaped or not ASCII (which
// encoding/json may fold to a known one), ends the read. A repeated key
// does too (encoding/json merges them; PreScan refuses them anyway).
func (r *jsonReader) object(known []string, member func(k int)) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.i++
	var seen uint64
	for r.ok {
		switch r.next() {
		case '}':
			r.i++
			return
		case ',':
			r.i++
			continue
		}
		end, escaped := r.stringEnd()
		key := r.b[r.i+1 : end-1]
		r.i = end
		r.next()
		r.i++ // the colon
		if escaped {
			r.fail()
			return
		}
		k := keyIndex(known, key)
		switch {
		case k == -2:
			r.fail()
			return
		case k == -1:
			r.skip()
		case seen&(1<<k) != 0:
			r.fail()
			return
		default:
			seen |= 1 << k
			member(k)
		}
	}
}

// keyIndex is key's index in known, -1 for a key encoding/json ignores,
// -2 for one it might match to a known name by folding case.
func keyIndex(known []string, key []byte) int {
	for i, name := range known {
		if string(key) == name {
			return i
		}
	}
	for _, c := range key {
		if c >= 0x80 {
			return -2
		}
	}
	for _, name := range known {
		if bytes.EqualFold(key, []byte(name)) {
			return -2
		}
	}
	return -1
}

// array calls elem with the reader at each element, which elem must
// consume; it reports whether the value was an array (false after null).
func (r *jsonReader) array(elem func()) bool {
	if r.null() {
		return false
	}
	if r.next() != '[' {
		r.fail()
		return false
	}
	r.i++
	for r.ok {
		switch r.next() {
		case ']':
			r.i++
			return true
		case ',':
			r.i++
			continue
		}
		elem()
	}
	return true
}

// stringEnd is the index after the string starting at r.i, and whether
// it holds a backslash.
func (r *jsonReader) stringEnd() (int, bool) {
	escaped := false
	for j := r.i + 1; ; {
		k := bytes.IndexByte(r.b[j:], '"')
		q := j + k
		if bytes.IndexByte(r.b[j:q], '\\') < 0 {
			return q + 1, escaped
		}
		escaped = true
		run := 0
		for p := q - 1; p > r.i && r.b[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// str reads a string into a copy of its own; null leaves s as it is, as
// encoding/json does.
func (r *jsonReader) str(s *string) { r.readString(s, false) }

// text reads a message's string, a slice of r.s when it has no escape.
func (r *jsonReader) text(s *string) { r.readString(s, true) }

func (r *jsonReader) readString(s *string, shared bool) {
	if !r.ok || r.null() {
		return
	}
	if r.next() != '"' {
		r.fail()
		return
	}
	start := r.i
	end, _ := r.stringEnd()
	tok := r.b[start:end]
	r.i = end
	if in := tok[1 : len(tok)-1]; plainBytes(in) {
		if !shared {
			*s = string(in)
			return
		}
		if r.s == "" {
			r.s = string(r.b)
		}
		*s = r.s[start+1 : end-1]
		return
	}
	// escapes or invalid UTF-8: encoding/json's own unquoting
	if json.Unmarshal(tok, s) != nil {
		r.fail()
	}
}

func (r *jsonReader) textPtr(p **string) {
	if !r.ok || r.null() {
		*p = nil
		return
	}
	var s string
	if r.text(&s); r.ok {
		*p = &s
	}
}

func (r *jsonReader) boolean(b *bool) {
	if !r.ok {
		return
	}
	switch r.next() {
	case 'n':
		r.i += len("null")
	case 't':
		*b = true
		r.i += len("true")
	case 'f':
		*b = false
		r.i += len("false")
	default:
		r.fail()
	}
}

func (r *jsonReader) boolPtr(p **bool) {
	if !r.ok || r.null() {
		*p = nil
		return
	}
	var b bool
	if r.boolean(&b); r.ok {
		*p = &b
	}
}

// number is the number token at r.i, "" (and the read ended) for another
// kind of value.
func (r *jsonReader) number() string {
	c := r.next()
	if c != '-' && (c < '0' || c > '9') {
		r.fail()
		return ""
	}
	j := r.i
	for j < len(r.b) {
		switch c := r.b[j]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			j++
			continue
		}
		break
	}
	tok := string(r.b[r.i:j])
	r.i = j
	return tok
}

func (r *jsonReader) int64Ptr(p **int64) {
	if !r.ok || r.null() {
		*p = nil
		return
	}
	tok := r.number()
	if !r.ok {
		return
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		r.fail()
		return
	}
	*p = &n
}

func (r *jsonReader) intPtr(p **int) {
	var n *int64
	if r.int64Ptr(&n); !r.ok || n == nil {
		*p = nil
		return
	}
	v := int(*n)
	if int64(v) != *n {
		r.fail()
		return
	}
	*p = &v
}

func (r *jsonReader) float64Ptr(p **float64) {
	if !r.ok || r.null() {
		*p = nil
		return
	}
	tok := r.number()
	if !r.ok {
		return
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		r.fail()
		return
	}
	*p = &f
}

// raw reads any value as encoding/json fills a json.RawMessage: a copy of
// its bytes, null included.
func (r *jsonReader) raw(m *json.RawMessage) {
	if !r.ok {
		return
	}
	r.next()
	start := r.i
	r.skip()
	*m = append(json.RawMessage(nil), r.b[start:r.i]...)
}

// skip passes over one value.
func (r *jsonReader) skip() {
	switch r.next() {
	case '"':
		r.i, _ = r.stringEnd()
	case '{', '[':
		depth := 0
		for ; r.i < len(r.b); r.i++ {
			switch r.b[r.i] {
			case '"':
				r.i, _ = r.stringEnd()
				r.i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					r.i++
					return
				}
			}
		}
	default:
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			r.i++
		}
	}
}

var (
	chatKeys = []string{"model", "messages", "stream", "stream_options", "tools", "tool_choice",
		"parallel_tool_calls", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
		"n", "seed", "presence_penalty", "frequency_penalty", "response_format", "reasoning_effort",
		"user", "prompt_cache_key"}
	messageKeys        = []string{"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "reasoning_content", "annotations", "reasoning"}
	partKeys           = []string{"type", "text", "image_url", "refusal"}
	imageURLKeys       = []string{"url", "detail"}
	toolCallKeys       = []string{"index", "id", "type", "function"}
	functionCallKeys   = []string{"name", "arguments"}
	toolKeys           = []string{"type", "function"}
	functionDefKeys    = []string{"name", "description", "parameters", "strict"}
	streamOptionsKeys  = []string{"include_usage"}
	responseFormatKeys = []string{"type", "json_schema"}
	jsonSchemaKeys     = []string{"name", "schema", "strict"}
)

// chat reads a chatRequest; its fields are in chatKeys' order.
func (r *jsonReader) chat(w *chatRequest) {
	r.object(chatKeys, func(k int) {
		switch k {
		case 0:
			r.str(&w.Model)
		case 1:
			w.Messages = nil
			if r.array(func() {
				w.Messages = append(w.Messages, chatMessage{})
				r.message(&w.Messages[len(w.Messages)-1])
			}) && w.Messages == nil {
				w.Messages = []chatMessage{}
			}
		case 2:
			r.boolean(&w.Stream)
		case 3:
			if r.null() {
				w.StreamOptions = nil
				return
			}
			w.StreamOptions = &streamOptions{}
			r.object(streamOptionsKeys, func(int) { r.boolean(&w.StreamOptions.IncludeUsage) })
		case 4:
			w.Tools = nil
			if r.array(func() {
				w.Tools = append(w.Tools, tool{})
				r.tool(&w.Tools[len(w.Tools)-1])
			}) && w.Tools == nil {
				w.Tools = []tool{}
			}
		case 5:
			r.raw(&w.ToolChoice)
		case 6:
			r.boolPtr(&w.ParallelToolCalls)
		case 7:
			r.int64Ptr(&w.MaxTokens)
		case 8:
			r.int64Ptr(&w.MaxCompletionTokens)
		case 9:
			r.float64Ptr(&w.Temperature)
		case 10:
			r.float64Ptr(&w.TopP)
		case 11:
			r.stringList(&w.Stop)
		case 12:
			r.int64Ptr(&w.N)
		case 13:
			r.int64Ptr(&w.Seed)
		case 14:
			r.float64Ptr(&w.PresencePenalty)
		case 15:
			r.float64Ptr(&w.FrequencyPenalty)
		case 16:
			r.responseFormat(&w.ResponseFormat)
		case 17:
			r.str(&w.ReasoningEffort)
		case 18:
			r.str(&w.User)
		case 19:
			r.str(&w.PromptCacheKey)
		}
	})
}

// stringList reads a string or an array of strings as
// stringList.UnmarshalJSON does; a null in the array ends the read.
func (r *jsonReader) stringList(s *stringList) {
	switch r.next() {
	case 'n':
		r.i += len("null")
	case '"':
		var one string
		if r.str(&one); r.ok {
			*s = stringList{one}
		}
	case '[':
		many := stringList{}
		r.array(func() {
			if r.next() != '"' {
				r.fail()
				return
			}
			var v string
			r.str(&v)
			many = append(many, v)
		})
		*s = many
	default:
		r.fail()
	}
}

func (r *jsonReader) message(m *chatMessage) {
	if r.next() != '{' {
		r.fail() // null (a zero message) or another type
		return
	}
	r.object(messageKeys, func(k int) {
		switch k {
		case 0:
			r.text(&m.Role)
		case 1:
			r.content(&m.Content)
		case 2:
			r.text(&m.Name)
		case 3:
			m.ToolCalls = nil
			if r.array(func() {
				m.ToolCalls = append(m.ToolCalls, toolCall{})
				r.toolCall(&m.ToolCalls[len(m.ToolCalls)-1])
			}) && m.ToolCalls == nil {
				m.ToolCalls = []toolCall{}
			}
		case 4:
			r.text(&m.ToolCallID)
		case 5:
			r.textPtr(&m.Refusal)
		case 6:
			r.text(&m.Reasoning)
		case 7:
			r.raw(&m.Annotation)
		case 8:
			// looseString: a string is read, any other value ignored
			if r.next() == '"' {
				var s string
				r.text(&s)
				m.AltReasoning = looseString(s)
			} else {
				r.skip()
			}
		}
	})
}

// content reads a message's content as messageContent.UnmarshalJSON does.
func (r *jsonReader) content(c *messageContent) {
	switch r.next() {
	case 'n':
		r.i += len("null")
	case '"':
		var s string
		if r.text(&s); r.ok {
			c.Text = &s
		}
	case '[':
		c.IsParts = true
		c.Parts = []contentPart{}
		r.array(func() {
			c.Parts = append(c.Parts, contentPart{})
			r.part(&c.Parts[len(c.Parts)-1])
		})
	default:
		r.fail() // refused by UnmarshalJSON, which words the error
	}
}

func (r *jsonReader) part(p *contentPart) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(partKeys, func(k int) {
		switch k {
		case 0:
			r.text(&p.Type)
		case 1:
			r.text(&p.Text)
		case 2:
			if r.null() {
				p.ImageURL = nil
				return
			}
			p.ImageURL = &imageURL{}
			r.object(imageURLKeys, func(k int) {
				if k == 0 {
					r.text(&p.ImageURL.URL)
				} else {
					r.text(&p.ImageURL.Detail)
				}
			})
		case 3:
			r.text(&p.Refusal)
		}
	})
}

func (r *jsonReader) toolCall(tc *toolCall) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(toolCallKeys, func(k int) {
		switch k {
		case 0:
			r.intPtr(&tc.Index)
		case 1:
			r.text(&tc.ID)
		case 2:
			r.text(&tc.Type)
		case 3:
			if r.null() {
				return
			}
			r.object(functionCallKeys, func(k int) {
				if k == 0 {
					r.text(&tc.Function.Name)
				} else {
					r.text(&tc.Function.Arguments)
				}
			})
		}
	})
}

func (r *jsonReader) tool(t *tool) {
	if r.next() != '{' {
		r.fail()
		return
	}
	r.object(toolKeys, func(k int) {
		switch k {
		case 0:
			r.str(&t.Type)
		case 1:
			if r.null() {
				return
			}
			f := &t.Function
			r.object(functionDefKeys, func(k int) {
				switch k {
				case 0:
					r.str(&f.Name)
				case 1:
					r.str(&f.Description)
				case 2:
					r.raw(&f.Parameters)
				case 3:
					r.boolPtr(&f.Strict)
				}
			})
		}
	})
}

func (r *jsonReader) responseFormat(p **responseFormat) {
	if r.null() {
		*p = nil
		return
	}
	rf := &responseFormat{}
	*p = rf
	r.object(responseFormatKeys, func(k int) {
		if k == 0 {
			r.str(&rf.Type)
			return
		}
		if r.null() {
			rf.JSONSchema = nil
			return
		}
		js := &jsonSchema{}
		rf.JSONSchema = js
		r.object(jsonSchemaKeys, func(k int) {
			switch k {
			case 0:
				r.str(&js.Name)
			case 1:
				r.raw(&js.Schema)
			case 2:
				r.boolPtr(&js.Strict)
			}
		})
	})
}
