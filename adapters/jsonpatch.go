package adapters

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	values := make([][]byte, len(fields))
	for i, f := range fields {
		v, ok := f.Value.(json.RawMessage)
		if !ok {
			var err error
			if v, err = json.Marshal(f.Value); err != nil {
				return nil, fmt.Errorf("encoding %s: %w", f.Key, err)
			}
		}
		values[i] = v
	}
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
		v, ok := f.Value.(json.RawMessage)
		if !ok {
			var err error
			if v, err = json.Marshal(f.Value); err != nil {
				return nil, fmt.Errorf("encoding %s: %w", f.Key, err)
			}
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		k, _ := json.Marshal(f.Key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, raw[end:]...), nil
}
