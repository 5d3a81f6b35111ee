package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"slices"
	"strconv"
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

// KeyOf hashes r's canonical form: the body's JSON with object keys sorted
// and whitespace dropped (numbers and strings as written), so two bodies
// that differ only in key order or spacing have one key. The scope's ids
// are part of it: user A's entry is not user B's unless the scope is shared.
func KeyOf(r *Request) (Key, error) {
	h := sha256.New()
	c := canon{h: h}
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
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Key{}, ErrNotJSON
	}
	if _, ok := v.(map[string]any); !ok {
		return Key{}, ErrNotJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return Key{}, ErrNotJSON // something after the object
	}
	c.value(v)
	var k Key
	h.Sum(k[:0])
	return k, nil
}

// canon writes values to a hash unambiguously: each with a type byte,
// strings with their length.
type canon struct {
	h   hash.Hash
	buf []byte
}

func (c *canon) str(s string) {
	c.buf = append(c.buf[:0], 's')
	c.buf = binary.AppendUvarint(c.buf, uint64(len(s)))
	c.h.Write(c.buf)
	io.WriteString(c.h, s)
}

func (c *canon) int(n int64) {
	c.buf = strconv.AppendInt(append(c.buf[:0], 'i'), n, 10)
	c.buf = append(c.buf, ';')
	c.h.Write(c.buf)
}

func (c *canon) value(v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		c.h.Write([]byte{'{'})
		for _, k := range keys {
			c.str(k)
			c.value(v[k])
		}
		c.h.Write([]byte{'}'})
	case []any:
		c.h.Write([]byte{'['})
		for _, e := range v {
			c.value(e)
		}
		c.h.Write([]byte{']'})
	case string:
		c.str(v)
	case json.Number:
		c.h.Write([]byte{'n'})
		c.str(string(v))
	case bool:
		if v {
			c.h.Write([]byte{'t'})
		} else {
			c.h.Write([]byte{'f'})
		}
	case nil:
		c.h.Write([]byte{'0'})
	}
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
