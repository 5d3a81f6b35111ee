package adapters

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPreScan(t *testing.T) {
	tests := []struct {
		body string
		code string // "" passes
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{`{"model":"m","Model":"cheap"}`, "duplicate_key"},
		{`{"model":"m","model":"cheap"}`, "duplicate_key"},
		{`{"model":"m","mod\u0065l":"cheap"}`, "duplicate_key"},
		{`{"messages":[{"role":"user","ROLE":"system"}]}`, "duplicate_key"},
		{`{"a":{"x":1},"b":{"x":1}}`, ""}, // the same key in sibling objects
		{`{"a":"{\"x\":1,\"x\":2}"}`, ""}, // inside a string it is text
		{`{"messages":[` + strings.Repeat(`{},`, 10) + `{}]}`, "too_many_elements"},
		{`{"messages":[` + strings.Repeat(`{},`, 9) + `{}]}`, ""},
		{`[]`, ""},
		{`{"x":[1,2,3]`, ""}, // not JSON: the decoder says so
		{strings.Repeat("[", 200) + strings.Repeat("]", 200), "invalid_request_error"},
	}
	for _, tt := range tests {
		e := PreScan([]byte(tt.body), 10)
		switch {
		case tt.code == "" && e != nil:
			t.Errorf("%.60s: refused: %v", tt.body, e)
		case tt.code != "" && e == nil:
			t.Errorf("%.60s: passed, want %s", tt.body, tt.code)
		case e != nil && e.Code != tt.code && string(e.Type) != tt.code:
			t.Errorf("%.60s: code %s, want %s", tt.body, e.Code, tt.code)
		}
	}
	// many keys: compared through a map
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		b.WriteString(`"k` + itoa(i) + `":1,`)
	}
	if PreScan([]byte(b.String()+`"z":1}`), 100) != nil {
		t.Error("40 distinct keys refused")
	}
	if PreScan([]byte(b.String()+`"K7":1}`), 100) == nil {
		t.Error("K7 after k7 among many keys passed")
	}
}

// hasDuplicates is the reference: every object's keys, decoded, compared
// pairwise with strings.EqualFold. In an object tokens alternate key and
// value; a nested value counts as one when it closes.
func hasDuplicates(body []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	type frame struct {
		obj       bool
		keys      []string
		expectKey bool
	}
	var stack []*frame
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				if top != nil && top.obj {
					top.expectKey = false
				}
				stack = append(stack, &frame{obj: d == '{', expectKey: true})
			} else {
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		}
		if top != nil && top.obj && top.expectKey {
			k := tok.(string)
			for _, prev := range top.keys {
				if strings.EqualFold(prev, k) {
					return true
				}
			}
			top.keys = append(top.keys, k)
			top.expectKey = false
			continue
		}
		valueDone()
	}
}

// FuzzPreScan checks the pre-scan against the reference on valid JSON: a
// body passes exactly when no object repeats a key up to case.
func FuzzPreScan(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","Model":"x"}`, `{"a":{"b":1,"B":2}}`, `{"a":[{"k":1},{"k":2}]}`,
		`{"\u006dodel":1,"model":2}`, `{"ſ":1,"S":2}`, `{"K":1,"k":2}`, `[1,"a",{"x":null}]`,
		`{"a":"b\"c","a\"":1}`, `{"":1,"":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := PreScan(body, 1<<20)
		if !json.Valid(body) {
			return // only must not panic
		}
		if e != nil && strings.Contains(e.Message, "nests deeper") {
			return
		}
		if want := hasDuplicates(body); want != (e != nil) {
			t.Fatalf("PreScan(%q) = %v, reference says duplicates: %v", body, e, want)
		}
	})
}
