package adapters

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSetFields(t *testing.T) {
	tests := []struct {
		name, in string
		fields   []Field
		want     string
	}{
		{"replace", `{"model":"a","x":{"y":[1,2]}}`, []Field{{"model", "b"}}, `{"model":"b","x":{"y":[1,2]}}`},
		{"append", `{"model":"a"}`, []Field{{"stream_options", json.RawMessage(`{"include_usage":true}`)}}, `{"model":"a","stream_options":{"include_usage":true}}`},
		{"empty object", `{}`, []Field{{"model", "m"}}, `{"model":"m"}`},
		{"unknown kept", ` {"z":1.50,"model":"a","w":"\u00e9"} `, []Field{{"model", "b"}}, `{"z":1.50,"model":"b","w":"\u00e9"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SetFields([]byte(tt.in), tt.fields...)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := SetFields([]byte(`[1]`), Field{"model", "b"}); err == nil {
		t.Fatal("array accepted as object")
	}
}

func TestAppendFields(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"model":"m","messages":[]}`, `{"model":"m","messages":[],"a":1,"b":{"x":true}}`},
		{`{}`, `{"a":1,"b":{"x":true}}`},
		{" {\n} \n", " {\n\"a\":1,\"b\":{\"x\":true}} \n"},
	}
	for _, tt := range tests {
		got, err := AppendFields([]byte(tt.in), Field{Key: "a", Value: 1}, Field{Key: "b", Value: json.RawMessage(`{"x":true}`)})
		if err != nil || string(got) != tt.want || !json.Valid(got) {
			t.Errorf("AppendFields(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"a":1} x`, ``, `"{"`} {
		if _, err := AppendFields([]byte(bad), Field{Key: "a", Value: 1}); err == nil {
			t.Errorf("AppendFields(%q) accepted", bad)
		}
	}
}

func TestTopLevelMember(t *testing.T) {
	tests := []struct {
		in, want string
		found    bool
	}{
		{`{"id":"x","choices":[{"message":{"content":"a \"usage\": {}","usage":1}}],"usage":{"prompt_tokens":3}}`, `{"prompt_tokens":3}`, true},
		{` { "usage" : null } `, `null`, true},
		{`{"a":{"usage":{"x":1}},"b":[1,2,{"usage":2}]}`, ``, false},
		{`{"us\u0061ge":{"x":1}}`, `{"x":1}`, true},
		{`{"usage":1,"usage":{"x":2}}`, `{"x":2}`, true},
		{`{}`, ``, false},
		{`{"a":"}\\","usage":[1,"]"]}`, `[1,"]"]`, true},
	}
	for _, tt := range tests {
		got, found, err := TopLevelMember([]byte(tt.in), "usage")
		if err != nil || found != tt.found || string(got) != tt.want {
			t.Errorf("TopLevelMember(%s) = %s, %v, %v; want %s, %v", tt.in, got, found, err, tt.want, tt.found)
		}
	}
	for _, bad := range []string{`[]`, `{"usage":`, `{"a" 1}`, `{"a":1,}x`, `{"a":"open}`, `{"a":{"b":1}`} {
		if _, _, err := TopLevelMember([]byte(bad), "usage"); err == nil {
			t.Errorf("TopLevelMember(%s) accepted", bad)
		}
	}
}

// FuzzTopLevelMember: on every document encoding/json accepts as an
// object, the member found is the one encoding/json would decode.
func FuzzTopLevelMember(f *testing.F) {
	f.Add([]byte(`{"id":"x","usage":{"prompt_tokens":3},"choices":[]}`))
	f.Add([]byte(`{"us\u0061ge":1,"usage":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(raw, &want) != nil {
			return
		}
		got, found, err := TopLevelMember(raw, "usage")
		if err != nil {
			t.Fatalf("refused a valid object %q: %v", raw, err)
		}
		w, ok := want["usage"]
		if found != ok {
			t.Fatalf("%q: found %v, encoding/json %v", raw, found, ok)
		}
		if ok && !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(w)) {
			t.Fatalf("%q: got %s, encoding/json %s", raw, got, w)
		}
	})
}

// setFieldsCases are bodies SetFields' fast path takes and the ones it
// leaves to the decoder.
var setFieldsCases = []string{
	`{"model":"a","messages":[{"role":"user","content":"hi"}],"stream":true}`,
	` {"model" : "a" , "x" : [1, {"y":null}] } trailing`,
	`{"model":"a","model":"b"}`,
	`{"mod\u0065l":"a"}`,
	`{"<b>":1,"model":"a"}`,
	"{\"k\xff\":1}",
	`{"é":1}`,
	`{"model":"a",}`,
	`{"model":tru}`,
	`{"model":"a"`,
	`{}`,
	`[1]`,
	``,
	`{"a":{"b":[}]}}`,
}

// SetFields writes exactly what encoding/json's decoder path writes, and
// fails where it fails.
func FuzzSetFields(f *testing.F) {
	for _, c := range setFieldsCases {
		f.Add([]byte(c), "b")
	}
	f.Fuzz(func(t *testing.T, raw []byte, model string) {
		checkSetFields(t, raw, Field{Key: "model", Value: model}, Field{Key: "max_tokens", Value: int64(7)})
	})
}

func TestSetFieldsMatchesDecoder(t *testing.T) {
	for _, c := range setFieldsCases {
		for _, model := range []string{"b", "a<b>", "é", ""} {
			checkSetFields(t, []byte(c), Field{Key: "model", Value: model}, Field{Key: "n", Value: 2},
				Field{Key: "stream_options", Value: json.RawMessage(`{"include_usage":true}`)})
		}
	}
	if _, ok := setFieldsFast([]byte(setFieldsCases[0]), []Field{{Key: "model", Value: "b"}}, [][]byte{[]byte(`"b"`)}); !ok {
		t.Error("a plain request body went the decoder's way")
	}
}

func checkSetFields(t *testing.T, raw []byte, fields ...Field) {
	t.Helper()
	values := make([][]byte, len(fields))
	for i, f := range fields {
		v, ok := f.Value.(json.RawMessage)
		if !ok {
			var err error
			if v, err = json.Marshal(f.Value); err != nil {
				t.Fatal(err)
			}
		}
		values[i] = v
	}
	want, wantErr := setFieldsDecoded(raw, fields, values)
	got, err := SetFields(raw, fields...)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Errorf("SetFields(%q) = %q, %v; the decoder's %q, %v", raw, got, err, want, wantErr)
	}
}

// BenchmarkSetFields renames the model of a short chat request, as a
// passthrough to a channel with a model map does.
func BenchmarkSetFields(b *testing.B) {
	raw := []byte(`{"model":"claude-sonnet-4-6","max_tokens":1024,"messages":[{"role":"user","content":"Say hello, and then tell me about the weather in Paris in spring."}],"stream":true}`)
	fields := []Field{{Key: "model", Value: "claude-sonnet-4-6-20260101"}}
	b.Run("SetFields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := SetFields(raw, fields...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		values, _ := fieldValues(fields)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := setFieldsDecoded(raw, fields, values); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzStringEnds checks the quote-to-quote string skipping of skipString
// and stringEnd against a byte-by-byte reading of the escapes.
func FuzzStringEnds(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"`, `"\\\"x"`, `"\`, `"a\"`, `"` + strings.Repeat("x", 300) + `\\\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		// the reference: each backslash escapes the byte after it
		want, escaped := -1, false
		for j := 1; j < len(b); j++ {
			if b[j] == '\\' {
				escaped = true
				j++
				continue
			}
			if b[j] == '"' {
				want = j
				break
			}
		}
		if got := stringEnd(b, 1); got != want {
			t.Fatalf("stringEnd(%q) = %d, want %d", b, got, want)
		}
		end, esc, err := skipString(b, 0)
		if want < 0 {
			if err == nil {
				t.Fatalf("skipString(%q) ended at %d, want an error", b, end)
			}
			return
		}
		if err != nil || end != want+1 || esc != escaped {
			t.Fatalf("skipString(%q) = %d, %v, %v; want %d, %v", b, end, esc, err, want+1, escaped)
		}
	})
}

// BenchmarkTopLevelMember finds the usage of a 1.4 KB chat answer, as
// every plain passthrough answer is read.
func BenchmarkTopLevelMember(b *testing.B) {
	raw := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1721172741,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Hello! It is nice to hear from you, and \"quoted\" text. ", 24) +
		`","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":231,"total_tokens":240}}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, found, err := TopLevelMember(raw, "usage"); err != nil || !found {
			b.Fatal(found, err)
		}
	}
}
