package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
)

// Key names one cached answer: a SHA-256 of the canonical request.
type Key [sha256.Size]byte

// Request is what a key is made of.
type Request struct {
	Scope   Scope
	UserID  int64
	TokenID int64
	// Dialect is the name of the dialect the caller spoke, Path the
	// endpoint's path (without the query, which may carry a key)
	Dialect, Path string
	// Model is the model the gateway resolves and prices (the asked
	// name, which model_map renames per channel)
	Model  string
	Stream bool
	// Headers are the values of the request headers that change an
	// answer (anthropic-version, anthropic-beta, openai-beta), in a fixed
	// order
	Headers []string
	// Body is the request's JSON body as the caller sent it
	Body []byte
}

// ErrNotJSON is returned for a body that is not one JSON object.
var ErrNotJSON = errors.New("cache: the request body is not a JSON object")

// maxDepth bounds the nesting the canonical form follows (the dialects'
// pre-scan refuses deeper bodies first).
const maxDepth = 256

// canonBuffers hold canonical forms being hashed.
var canonBuffers = sync.Pool{New: func() any { return &canon{buf: make([]byte, 0, 4<<10)} }}

// KeyOf hashes r's canonical form: the body's JSON with object keys sorted
// and whitespace dropped (numbers, strings and keys as written, escapes
// included), so two bodies that differ only in key order or spacing have
// one key. The scope's ids are part of it: user A's entry is not user B's
// unless the scope is shared. It reads the body in place: a miss pays no
// decoding.
func KeyOf(r *Request) (Key, error) {
	c := canonBuffers.Get().(*canon)
	defer func() {
		if cap(c.buf) <= 1<<20 {
			c.buf, c.pairs = c.buf[:0], c.pairs[:0]
			canonBuffers.Put(c)
		}
	}()
	c.str("cmg-cache-v1")
	c.str(string(r.Scope))
	switch r.Scope {
	case ScopeKey:
		c.int(r.TokenID)
	case ScopeShared:
	default:
		c.int(r.UserID)
	}
	c.str(r.Dialect)
	c.str(r.Path)
	c.str(r.Model)
	if r.Stream {
		c.str("stream")
	} else {
		c.str("body")
	}
	c.int(int64(len(r.Headers)))
	for _, v := range r.Headers {
		c.str(v)
	}
	b := r.Body
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Key{}, ErrNotJSON
	}
	end, ok := c.value(b, i, 0)
	if !ok || skipSpace(b, end) != len(b) {
		return Key{}, ErrNotJSON
	}
	return sha256.Sum256(c.buf), nil
}

// canon builds a canonical form: each value with a type byte, strings
// with their length, so no two values write the same bytes.
type canon struct {
	buf   []byte
	pairs []member
}

// member is an object member's key and value, as offsets in the body.
type member struct {
	k0, k1, v0 int
}

func (c *canon) str(s string) {
	c.buf = append(c.buf, 's')
	c.buf = binary.AppendUvarint(c.buf, uint64(len(s)))
	c.buf = append(c.buf, s...)
}

func (c *canon) raw(tag byte, b []byte) {
	c.buf = append(c.buf, tag)
	c.buf = binary.AppendUvarint(c.buf, uint64(len(b)))
	c.buf = append(c.buf, b...)
}

func (c *canon) int(n int64) {
	c.buf = strconv.AppendInt(append(c.buf, 'i'), n, 10)
	c.buf = append(c.buf, ';')
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value writes the value at b[i] (no space before it) and returns where
// it ends; false for JSON it cannot read.
func (c *canon) value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxDepth {
		return 0, false
	}
	switch ch := b[i]; {
	case ch == '{':
		return c.object(b, i, depth)
	case ch == '[':
		c.buf = append(c.buf, '[')
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			c.buf = append(c.buf, ']')
			return i + 1, true
		}
		for {
			end, ok := c.value(b, i, depth+1)
			if !ok {
				return 0, false
			}
			i = skipSpace(b, end)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ']' {
				c.buf = append(c.buf, ']')
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipSpace(b, i+1)
		}
	case ch == '"':
		end, ok := stringEnd(b, i)
		if !ok {
			return 0, false
		}
		c.raw('s', b[i+1:end-1])
		return end, true
	case ch == '-' || ch >= '0' && ch <= '9':
		j := i + 1
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		c.raw('n', b[i:j])
		return j, true
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			c.buf = append(c.buf, lit[0])
			return i + len(lit), true
		}
	}
	return 0, false
}

// object writes the object at b[i] with its members in the order of their
// keys' bytes.
func (c *canon) object(b []byte, i, depth int) (int, bool) {
	base := len(c.pairs)
	defer func() { c.pairs = c.pairs[:base] }()
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		c.buf = append(c.buf, '{', '}')
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		k0 := i
		kend, ok := stringEnd(b, i)
		if !ok {
			return 0, false
		}
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		v0 := skipSpace(b, i+1)
		vend, ok := skipValue(b, v0, depth+1)
		if !ok {
			return 0, false
		}
		c.pairs = append(c.pairs, member{k0: k0, k1: kend, v0: v0})
		i = skipSpace(b, vend)
		if i >= len(b) {
			return 0, false
		}
		if b[i] == '}' {
			i++
			break
		}
		if b[i] != ',' {
			return 0, false
		}
		i = skipSpace(b, i+1)
	}
	ms := c.pairs[base:]
	slices.SortFunc(ms, func(x, y member) int { return bytes.Compare(b[x.k0:x.k1], b[y.k0:y.k1]) })
	c.buf = append(c.buf, '{')
	for n := range len(ms) {
		m := c.pairs[base+n] // c.pairs may grow under the members' values
		c.raw('s', b[m.k0+1:m.k1-1])
		if _, ok := c.value(b, m.v0, depth+1); !ok {
			return 0, false
		}
	}
	c.buf = append(c.buf, '}')
	return i, true
}

// stringEnd is where the string opening at b[i] ends (after its closing
// quote).
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipValue is where the value at b[i] ends, without writing it.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxDepth {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		// strings may hold brackets: walk them, counting the rest
		n := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				n++
				if n > maxDepth {
					return 0, false
				}
			case '}', ']':
				n--
				if n == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j, j > i
}

// Peek returns the top-level value of a JSON body at path (object keys),
// for a dialect's sampling options the neutral request does not keep;
// nil when absent or unreadable.
func Peek(body []byte, path ...string) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
