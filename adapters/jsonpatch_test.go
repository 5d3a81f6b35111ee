package adapters

import (
	"encoding/json"
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
