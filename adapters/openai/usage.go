package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Reading usage is on every relayed answer's path: through encoding/json
// it was the gateway's largest cost of its own per request (its validating
// scan and reflection, for an object of a few integers). decodeUsage reads
// the shape upstreams send with a strict scanner of its own; anything else
// goes to encoding/json, so the outcome is json.Unmarshal's.

// usageKeys are the names encoding/json would match, case aside.
var usageKeys = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "prompt_cache_hit_tokens", "cached_tokens"}

// decodeUsage does what json.Unmarshal(raw, dst) does for the usage
// object upstreams send: null, or an object whose members are integers,
// nulls and objects of those, with plain names; the fields' own members
// must be integers, the two details objects or null (those only). It
// reports false, dst untouched, for anything else (another number form,
// a string, an escaped name, a name differing from a field's only in
// case, invalid JSON), which the caller hands to encoding/json.
func decodeUsage(raw []byte, dst **usage) bool {
	s := scanner{b: raw}
	if s.null() {
		if !s.end() {
			return false
		}
		*dst = nil
		return true
	}
	// a second usage member decodes into the first, as encoding/json does
	var u usage
	var prompt, completion detail
	if *dst != nil {
		u = **dst
		prompt = detail{present: u.PromptTokensDetails != nil, n: u.PromptTokensDetails.cached()}
		completion = detail{present: u.CompletionTokensDetails != nil, n: u.CompletionTokensDetails.reasoning()}
	}
	if !s.open() {
		return false
	}
	for first := true; ; first = false {
		key, more, ok := s.next(first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		switch string(key) {
		case "prompt_tokens":
			ok = s.integer(&u.PromptTokens)
		case "completion_tokens":
			ok = s.integer(&u.CompletionTokens)
		case "total_tokens":
			ok = s.integer(&u.TotalTokens)
		case "prompt_tokens_details":
			ok = prompt.read(&s, "cached_tokens")
		case "completion_tokens_details":
			ok = completion.read(&s, "reasoning_tokens")
		case "prompt_cache_hit_tokens":
			ok = s.integer(&u.PromptCacheHitTokens)
		case "cached_tokens":
			ok = s.integer(&u.CachedTokens)
		default:
			ok = !foldsTo(key, usageKeys...) && s.skip(true)
		}
		if !ok {
			return false
		}
	}
	if !s.end() {
		return false
	}
	u.PromptTokensDetails, u.CompletionTokensDetails = nil, nil
	if prompt.present {
		u.PromptTokensDetails = &promptDetails{CachedTokens: prompt.n}
	}
	if completion.present {
		u.CompletionTokensDetails = &completionsDetails{ReasoningTokens: completion.n}
	}
	*dst = &u
	return true
}

// usageChunkKeys is the one member chunkUsage reads.
var usageChunkKeys = []string{"usage"}

// chunkUsage is the usage of a stream chunk as json.Unmarshal(data,
// &usageOnly{}) reads it; valid is false when that fails.
func chunkUsage(data []byte) (u *usage, valid bool) {
	// one pass that checks the syntax as it reads (jsonReader), where
	// json.Valid and then the member walk were two; anything it does not
	// read as encoding/json would (an escaped, folded or repeated key, a
	// usage decodeUsage refuses) goes to encoding/json below
	r := jsonReader{b: data, ok: true}
	r.object(usageChunkKeys, func(int) {
		start := r.i
		if r.skip(0); r.ok && !decodeUsage(data[start:r.i], &u) {
			r.fail()
		}
	})
	if r.ok && r.next() == 0 && r.i == len(data) {
		return u, true
	}
	u = nil
	var w usageOnly
	if json.Unmarshal(data, &w) != nil {
		return nil, false
	}
	return w.Usage, true
}

// detail is a detail object being read: whether the pointer
// is set, and its one field.
type detail struct {
	present bool
	n       int64
}

// read decodes a details object's value: null clears it, an object sets
// its field name (other integer or null members ignored).
func (d *detail) read(s *scanner, name string) bool {
	if s.null() {
		d.present, d.n = false, 0
		return true
	}
	if !s.open() {
		return false
	}
	if !d.present {
		d.present, d.n = true, 0
	}
	for first := true; ; first = false {
		key, more, ok := s.next(first)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if string(key) == name {
			ok = s.integer(&d.n)
		} else {
			ok = !foldsTo(key, name) && s.skip(false)
		}
		if !ok {
			return false
		}
	}
}

func (p *promptDetails) cached() int64 {
	if p == nil {
		return 0
	}
	return p.CachedTokens
}

func (c *completionsDetails) reasoning() int64 {
	if c == nil {
		return 0
	}
	return c.ReasoningTokens
}

// scanner reads the small JSON grammar decodeUsage accepts, strictly: it
// fails on what it does not know rather than guess.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// take consumes c after any space.
func (s *scanner) take(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether nothing but space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *scanner) open() bool { return s.take('{') }

// null consumes a null value, if that is what comes.
func (s *scanner) null() bool {
	s.space()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// next moves to the next member's value and returns its name; more is
// false at the object's end.
func (s *scanner) next(first bool) (key []byte, more, ok bool) {
	if s.take('}') {
		return nil, false, true
	}
	if !first && !s.take(',') {
		return nil, false, false
	}
	if !s.take('"') {
		return nil, false, false
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != '"' {
		c := s.b[s.i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return nil, false, false // an escape, a space, anything unusual
		}
		s.i++
	}
	if s.i == len(s.b) {
		return nil, false, false
	}
	key = s.b[start:s.i]
	s.i++
	return key, true, s.take(':')
}

// integer reads a JSON integer that fits an int64, as encoding/json
// decodes one into it; false for any other value.
func (s *scanner) integer(n *int64) bool {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	x, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	switch {
	case s.i == digits, s.b[digits] == '0' && s.i-digits > 1, err != nil,
		// a number encoding/json refuses for an int64
		s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		s.i = start
		return false
	}
	*n = x
	return true
}

// skip passes over a member encoding/json ignores: an integer, null, or
// (when nested) an object of those.
func (s *scanner) skip(nested bool) bool {
	var n int64
	if s.null() || s.integer(&n) {
		return true
	}
	if !nested || !s.open() {
		return false
	}
	for first := true; ; first = false {
		_, more, ok := s.next(first)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !s.skip(false) {
			return false
		}
	}
}

// foldsTo reports whether key is one of names but for case: a member
// encoding/json would take for that field (it folds as bytes.EqualFold).
func foldsTo(key []byte, names ...string) bool {
	for _, name := range names {
		if bytes.EqualFold(key, []byte(name)) {
			return true
		}
	}
	return false
}
