package adapters

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DecodeJSON decodes a client's JSON body into v, turning decoder errors
// into 400s that name the field and say what was expected.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("the request body is empty: send a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return JSONError(err)
	}
	return nil
}

// JSONError turns an encoding/json error into a 400 a person can act on.
func JSONError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return BadRequest("invalid type for '%s': expected %s, got JSON %s", field, jsonTypeName(typeErr), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("the request body is not valid JSON (at byte %d): %v", syntaxErr.Offset, err)
	}
	return BadRequest("the request body could not be parsed: %v", err)
}

func jsonTypeName(e *json.UnmarshalTypeError) string {
	if e.Type == nil {
		return "another type"
	}
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return e.Type.String()
}

// PeekModel reads the top-level "model" string of a JSON body and nothing
// else; "" when there is none or the body is not JSON.
func PeekModel(body []byte) string {
	var m struct {
		Model json.RawMessage `json:"model"`
	}
	if json.Unmarshal(body, &m) != nil {
		// a body broken after its model still names it: scan for the key
		dec := json.NewDecoder(bytes.NewReader(body))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return ""
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return ""
			}
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return ""
			}
			if tok == "model" {
				m.Model = v
				break
			}
		}
	}
	var s string
	if json.Unmarshal(m.Model, &s) != nil {
		return ""
	}
	return s
}
