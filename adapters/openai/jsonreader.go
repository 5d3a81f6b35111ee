package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonReader reads a JSON document into known shapes, checking its syntax
// as it goes. ok turns false at the first thing it does not read exactly as
// json.Unmarshal would, or that is not valid JSON; every method is then a
// no-op, and what was read is dropped.
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

// maxSkipDepth is how deep a skipped value may nest before the reader
// leaves the body to encoding/json (PreScan refuses deeper ones anyway).
const maxSkipDepth = 128

func (r *jsonReader) fail() { r.ok = false }

// next skips whitespace and returns the byte there, 0 at the end.
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

// literal consumes word (true, false, null) or fails.
func (r *jsonReader) literal(word string) {
	if !bytes.HasPrefix(r.b[r.i:], []byte(word)) {
		r.fail()
		return
	}
	r.i += len(word)
}

// null consumes a null literal if one is next.
func (r *jsonReader) null() bool {
	if r.ok && r.next() == 'n' {
		r.literal("null")
		return true
	}
	return false
}

// object reads an object's members, calling member with each key's index
// in known and the reader at its value, which member must consume. A key
// that matches a known one only when case is folded, or is escaped or not
// ASCII (which encoding/json may fold to a known one), ends the read. A
// repeated key does too (encoding/json merges them; PreScan refuses them
// anyway). Other keys' values are skipped.
func (r *jsonReader) object(known []string, member func(k int)) {
	if !r.ok || r.next() != '{' {
		r.fail()
		return
	}
	r.i++
	if r.next() == '}' {
		r.i++
		return
	}
	var seen uint64
	for r.ok {
		if r.next() != '"' {
			r.fail()
			return
		}
		end, escaped := r.stringEnd()
		if !r.ok || escaped {
			r.fail()
			return
		}
		key := r.b[r.i+1 : end-1]
		r.i = end
		if r.next() != ':' {
			r.fail()
			return
		}
		r.i++
		r.next()
		switch k := keyIndex(known, key); {
		case k == -2:
			r.fail()
			return
		case k == -1:
			r.skip(0)
		case seen&(1<<k) != 0:
			r.fail()
			return
		default:
			seen |= 1 << k
			member(k)
		}
		if !r.ok {
			return
		}
		switch r.next() {
		case ',':
			r.i++
		case '}':
			r.i++
			return
		default:
			r.fail()
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
	if r.null() || !r.ok {
		return false
	}
	if r.next() != '[' {
		r.fail()
		return false
	}
	r.i++
	if r.next() == ']' {
		r.i++
		return true
	}
	for r.ok {
		r.next()
		if elem(); !r.ok {
			break
		}
		switch r.next() {
		case ',':
			r.i++
		case ']':
			r.i++
			return true
		default:
			r.fail()
		}
	}
	return true
}

// stringEnd is the index after the string starting at r.i, and whether
// it holds an escape; it fails on a control character, an invalid escape
// or a string left open.
func (r *jsonReader) stringEnd() (int, bool) {
	escaped := false
	b := r.b
	for j := r.i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			escaped = true
			if j+1 >= len(b) {
				r.fail()
				return len(b), escaped
			}
			j++
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					r.fail()
					return len(b), escaped
				}
				j += 4
			default:
				r.fail()
				return len(b), escaped
			}
		case c < 0x20:
			r.fail()
			return len(b), escaped
		}
	}
	r.fail()
	return len(b), escaped
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
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
	end, escaped := r.stringEnd()
	if !r.ok {
		return
	}
	r.i = end
	tok := r.b[start:end]
	if in := tok[1 : len(tok)-1]; !escaped && (isASCII(in) || utf8.Valid(in)) {
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

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
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
		r.literal("null")
	case 't':
		*b = true
		r.literal("true")
	case 'f':
		*b = false
		r.literal("false")
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

// number is the number token at r.i, checked against JSON's grammar; ""
// (and the read ended) for another kind of value or a malformed number.
func (r *jsonReader) number() string {
	start := r.i
	if r.skipNumber(); !r.ok {
		return ""
	}
	return string(r.b[start:r.i])
}

// skipNumber passes over a number, checking it against JSON's grammar.
func (r *jsonReader) skipNumber() {
	b, j := r.b, r.i
	digits := func() bool {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		digits()
	default:
		r.fail()
		return
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			r.fail()
			return
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			r.fail()
			return
		}
	}
	r.i = j
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
	if r.skip(0); r.ok {
		*m = append(json.RawMessage(nil), r.b[start:r.i]...)
	}
}

// skip passes over one value, checking its syntax.
func (r *jsonReader) skip(depth int) {
	if !r.ok {
		return
	}
	switch r.next() {
	case '"':
		end, _ := r.stringEnd()
		r.i = end
	case '{', '[':
		if depth >= maxSkipDepth {
			r.fail()
			return
		}
		obj := r.b[r.i] == '{'
		closing := byte(']')
		if obj {
			closing = '}'
		}
		r.i++
		if r.next() == closing {
			r.i++
			return
		}
		for r.ok {
			if obj {
				if r.next() != '"' {
					r.fail()
					return
				}
				end, _ := r.stringEnd()
				r.i = end
				if !r.ok || r.next() != ':' {
					r.fail()
					return
				}
				r.i++
			}
			if r.skip(depth + 1); !r.ok {
				return
			}
			switch r.next() {
			case ',':
				r.i++
			case closing:
				r.i++
				return
			default:
				r.fail()
			}
		}
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	default:
		r.skipNumber()
	}
}
