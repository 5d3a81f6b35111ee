package adapters

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode"
	"unicode/utf8"
)

// Limits of PreScan.
const (
	// DefaultMaxElements is the most elements one JSON array (messages,
	// parts, tools, inputs) or object may have unless configured.
	DefaultMaxElements = 10000
	// MaxNesting bounds how deep a request's JSON may nest.
	MaxNesting = 128
)

// PreScan checks a JSON request body before it is decoded, in one pass and
// without allocating for ordinary bodies. It refuses with a 400:
//
//   - an object with the same key twice, or two keys that differ only in
//     case ("model" and "Model"): decoders disagree on which one wins, so
//     a body passed through could mean one thing to the upstream and
//     another to the gateway's billing;
//   - an array or object with more than maxElements elements, or nesting
//     deeper than MaxNesting, so decoding is bounded in memory.
//
// A body that is not valid JSON is left to the decoder, which says where.
func PreScan(body []byte, maxElements int) *Error {
	if maxElements <= 0 {
		maxElements = DefaultMaxElements
	}
	var sc prescanner
	return sc.scan(body, maxElements)
}

type scanFrame struct {
	obj  bool
	want bool // an object's next string is a key; an array's next token starts a value
	n    int
	keys int                 // where this object's keys start in prescanner.keys
	seen map[string]struct{} // folded keys, once an object has many
}

// prescanner holds the first frames and keys in arrays of its own, on the
// caller's stack: the slices over them stay local to scan, since one kept
// in the struct itself would move the whole struct to the heap.
type prescanner struct {
	stack [16]scanFrame
	arr   [32][]byte
}

// smallObject is how many keys an object may have before its keys are
// compared through a map rather than one by one.
const smallObject = 16

func (sc *prescanner) scan(b []byte, max int) *Error {
	frames := sc.stack[:0]
	keys := sc.arr[:0]
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			continue
		}
		var top *scanFrame
		if len(frames) > 0 {
			top = &frames[len(frames)-1]
			if !top.obj && top.want && c != ']' {
				top.want = false
				if top.n++; top.n > max {
					return tooManyElements(max)
				}
			}
		}
		switch c {
		case '{', '[':
			if len(frames) >= MaxNesting {
				return BadRequest("the request's JSON nests deeper than %d levels", MaxNesting)
			}
			frames = append(frames, scanFrame{obj: c == '{', want: true, keys: len(keys)})
		case '}', ']':
			if top == nil || top.obj != (c == '}') {
				return nil // invalid: the decoder will say so
			}
			keys = keys[:top.keys]
			frames = frames[:len(frames)-1]
		case ',':
			if top == nil {
				return nil
			}
			top.want = true
		case '"':
			end := stringEnd(b, i+1)
			if end < 0 {
				return nil
			}
			if top != nil && top.obj && top.want {
				top.want = false
				if top.n++; top.n > max {
					return tooManyElements(max)
				}
				var e *Error
				if keys, e = key(keys, top, b[i+1:end]); e != nil {
					return e
				}
			}
			i = end
		default:
			// a number or a literal: skip to its end
			for i+1 < len(b) && !isDelimiter(b[i+1]) {
				i++
			}
		}
	}
	return nil
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
		return true
	}
	return false
}

// stringEnd returns the index of the quote closing a string whose content
// starts at i, or -1. Like skipString it jumps from quote to quote.
func stringEnd(b []byte, i int) int {
	for j := i; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		run := 0
		for p := q - 1; p >= i && b[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q
		}
		j = q + 1
	}
}

// key records one key of the innermost object in keys and refuses a
// repeat.
func key(keys [][]byte, top *scanFrame, raw []byte) ([][]byte, *Error) {
	k := raw
	if bytes.IndexByte(raw, '\\') >= 0 {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
			return keys, nil // the decoder will refuse it
		}
		k = []byte(s)
	}
	if top.seen == nil {
		for _, prev := range keys[top.keys:] {
			if bytes.EqualFold(prev, k) {
				return keys, duplicateKey(prev, k)
			}
		}
		keys = append(keys, k)
		if len(keys)-top.keys <= smallObject {
			return keys, nil
		}
		top.seen = make(map[string]struct{}, 2*smallObject)
		for _, prev := range keys[top.keys:] {
			top.seen[fold(prev)] = struct{}{}
		}
		return keys, nil
	}
	f := fold(k)
	if _, dup := top.seen[f]; dup {
		return keys, duplicateKey(k, k)
	}
	top.seen[f] = struct{}{}
	return keys, nil
}

// fold maps a key to one representative of its case-folding class, so
// that bytes.EqualFold(a, b) exactly when fold(a) == fold(b).
func fold(k []byte) string {
	out := make([]byte, 0, len(k))
	for len(k) > 0 {
		r, size := utf8.DecodeRune(k)
		k = k[size:]
		if r == utf8.RuneError && size == 1 {
			out = append(out, 0xff) // never valid UTF-8: cannot collide with a real rune
			continue
		}
		// the smallest rune of r's fold orbit
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		out = utf8.AppendRune(out, m)
	}
	return string(out)
}

func duplicateKey(a, b []byte) *Error {
	e := BadRequest("the request's JSON has the key %q twice", shorten(string(b)))
	if !bytes.Equal(a, b) {
		e = BadRequest("the request's JSON has both %q and %q: keys that differ only in case are refused, since decoders disagree on which one counts",
			shorten(string(a)), shorten(string(b)))
	}
	e.Code = "duplicate_key"
	return e
}

func tooManyElements(max int) *Error {
	return &Error{Status: http.StatusBadRequest, Type: ErrInvalidRequest, Code: "too_many_elements",
		Message: "the request has a list or object with more than " + itoa(max) + " elements (messages, parts, tools or inputs): split it into smaller requests"}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}
