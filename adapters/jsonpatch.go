package adapters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Field is a top-level JSON member to set in a passthrough body.
type Field struct {
	Key   string
	Value any // marshalled with encoding/json; json.RawMessage goes in as it is
}

// SetFields returns raw (a JSON object) with the given top-level members set,
// replacing existing ones in place and appending the others, and every other
// member kept byte for byte. It is how passthrough changes the model name
// without losing fields the gateway does not know.
func SetFields(raw []byte, fields ...Field) ([]byte, error) {
	values, err := fieldValues(fields)
	if err != nil {
		return nil, err
	}
	if out, ok := setFieldsFast(raw, fields, values); ok {
		return out, nil
	}
	return setFieldsDecoded(raw, fields, values)
}

// fieldValues encodes the fields' values.
func fieldValues(fields []Field) ([][]byte, error) {
	values := make([][]byte, len(fields))
	for i, f := range fields {
		v, err := fieldValue(f)
		if err != nil {
			return nil, err
		}
		values[i] = v
	}
	return values, nil
}

// fieldValue is f's value as encoding/json writes it; the values the hot
// path sets (a model name, a token limit) without reflection.
func fieldValue(f Field) ([]byte, error) {
	switch v := f.Value.(type) {
	case json.RawMessage:
		return v, nil
	case string:
		if plainJSONString(v) {
			return appendQuoted(nil, v), nil
		}
	case int64:
		return strconv.AppendInt(nil, v, 10), nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), nil
	}
	v, err := json.Marshal(f.Value)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", f.Key, err)
	}
	return v, nil
}

// plainJSONString reports whether encoding/json writes s as it is between
// quotes: printable ASCII with nothing it escapes (quote, backslash, and
// the HTML characters < > &).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendQuoted(out []byte, s string) []byte {
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// appendKey writes a member's key as encoding/json writes the string.
func appendKey(out []byte, key string) []byte {
	if plainJSONString(key) {
		return appendQuoted(out, key)
	}
	k, _ := json.Marshal(key)
	return append(out, k...)
}

// setFieldsFast is SetFields for a well-formed object, skipping values
// byte-wise instead of decoding them: ok is false for anything it would
// have to guess at (a body that is not valid JSON), which the decoder
// path then answers, errors included. Its output is the decoder path's,
// byte for byte.
func setFieldsFast(raw []byte, fields []Field, values [][]byte) ([]byte, bool) {
	start := skipSpace(raw, 0)
	if start >= len(raw) || raw[start] != '{' {
		return nil, false
	}
	end, err := skipValue(raw, start)
	if err != nil || !json.Valid(raw[start:end]) {
		return nil, false
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, '{')
	if len(fields) > 64 {
		return nil, false // more than done can tell apart
	}
	var done uint64 // fields set in place
	first, plain := true, true
	err = EachMember(raw[start:end], func(key, value []byte) bool {
		if plain = plainJSONString(string(key)); !plain {
			return false // the decoder's spelling of it, invalid UTF-8 and all
		}
		for i, f := range fields {
			if f.Key == string(key) {
				value, done = values[i], done|1<<i
				break
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendQuoted(out, string(key))
		out = append(out, ':')
		out = append(out, value...)
		return true
	})
	if err != nil || !plain {
		return nil, false
	}
	for i, f := range fields {
		if done&(1<<i) != 0 {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendKey(out, f.Key)
		out = append(out, ':')
		out = append(out, values[i]...)
	}
	return append(out, '}'), true
}

// setFieldsDecoded is SetFields through encoding/json's decoder, token by
// token: the reference the fast path matches, and its fallback.
func setFieldsDecoded(raw []byte, fields []Field, values [][]byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("body is not a JSON object")
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, '{')
	done := make([]bool, len(fields))
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		for i, f := range fields {
			if f.Key == key {
				val, done[i] = values[i], true
				break
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		k, _ := json.Marshal(key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, val...)
	}
	for i, f := range fields {
		if done[i] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		k, _ := json.Marshal(f.Key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, values[i]...)
	}
	return append(out, '}'), nil
}

// AppendFields returns raw (a JSON object) with members added before its
// closing brace, without reading the rest: for members the caller knows
// are absent (the decoded request lacked them and no spelling of their key
// occurs in raw). It is SetFields' cheap case on the hot path.
func AppendFields(raw []byte, fields ...Field) ([]byte, error) {
	end := bytes.LastIndexByte(raw, '}')
	start := bytes.IndexByte(raw, '{')
	if start < 0 || end < start || len(bytes.TrimSpace(raw[end+1:])) != 0 {
		return nil, fmt.Errorf("body is not a JSON object")
	}
	empty := len(bytes.TrimSpace(raw[start+1:end])) == 0
	out := make([]byte, 0, len(raw)+32*len(fields))
	out = append(out, raw[:end]...)
	for _, f := range fields {
		v, err := fieldValue(f)
		if err != nil {
			return nil, err
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = appendKey(out, f.Key)
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, raw[end:]...), nil
}

// TopLevelMember returns the value of the top-level member key of a JSON
// object, reading the rest of the document only to skip it: the cheap way
// to find the usage in an answer relayed as it is. found is false when the
// object has no such member; of several, the last one counts. An error
// means raw is not a well-formed JSON object as far as it was read;
// callers then fall back to encoding/json.
func TopLevelMember(raw []byte, key string) (value json.RawMessage, found bool, err error) {
	err = EachMember(raw, func(k, v []byte) bool {
		if string(k) == key {
			value, found = v, true
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return value, found, nil
}

// EachMember calls fn with each member of the JSON object raw, in order:
// its key, unescaped, and its value as written, until fn returns false.
// Values are delimited, not validated. An error means raw is not a
// well-formed JSON object as far as it was read.
func EachMember(raw []byte, fn func(key, value []byte) bool) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return errNotObject
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return errNotObject
		}
		end, escaped, err := skipString(raw, i)
		if err != nil {
			return err
		}
		key := raw[i+1 : end-1]
		if escaped {
			// a key with escapes is compared after decoding it
			key = []byte(unquoted(raw[i:end]))
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return errNotObject
		}
		start := skipSpace(raw, i+1)
		stop, err := skipValue(raw, start)
		if err != nil {
			return err
		}
		if !fn(key, raw[start:stop]) {
			return nil
		}
		i = skipSpace(raw, stop)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return nil
		}
		return errNotObject
	}
	return errNotObject
}

var errNotObject = fmt.Errorf("not a well-formed JSON object")

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a quote)
// and whether it holds escapes. It jumps from quote to quote (a message's
// text is one long string): a quote after an odd run of backslashes is
// escaped and skipped.
func skipString(b []byte, i int) (int, bool, error) {
	escaped := false
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false, errNotObject
		}
		q := j + k
		if bytes.IndexByte(b[j:q], '\\') < 0 {
			return q + 1, escaped, nil
		}
		escaped = true
		run := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q + 1, true, nil
		}
		j = q + 1
	}
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errNotObject
	}
	switch b[i] {
	case '"':
		end, _, err := skipString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errNotObject
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	if j == i {
		return 0, errNotObject
	}
	return j, nil
}

func unquoted(s []byte) string {
	var v string
	if json.Unmarshal(s, &v) != nil {
		return ""
	}
	return v
}
