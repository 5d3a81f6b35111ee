package billing

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// filledRow sets every field of a usage row to a value of its own, through
// reflection, so a field added to store.UsageLog and not to appendRow
// fails the test below.
func filledRow(t *testing.T, text string) *store.UsageLog {
	t.Helper()
	row := &store.UsageLog{}
	v := reflect.ValueOf(row).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(text + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64, reflect.Int32:
			f.SetInt(int64(1000*i + 7))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(time.Time{}) {
				t.Fatalf("appendRow does not know field %s's type %s", v.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.ValueOf(time.Date(2026, 11, 26, 1, 2, 3, 456789012, time.FixedZone("x", 8*3600))))
		default:
			t.Fatalf("appendRow does not know field %s's type %s", v.Type().Field(i).Name, f.Type())
		}
	}
	return row
}

func TestRowEncodingMatchesJSON(t *testing.T) {
	texts := []string{
		"plain ",
		"quote \" backslash \\ slash / ",
		"control \x00\x01\x1f\t\n\r\x7f ",
		"html <script>&amp; ",
		"unicode 日本語 🙂 \u2028\u2029 ",
		"invalid \xff\xfe utf8 \xe2\x82 ",
	}
	for _, text := range texts {
		row := filledRow(t, text)
		mine := appendRow(nil, row)
		want, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		var a, b store.UsageLog
		if err := json.Unmarshal(mine, &a); err != nil {
			t.Fatalf("%q: appendRow wrote invalid JSON: %v\n%s", text, err, mine)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) || !a.CreatedAt.Equal(row.CreatedAt) {
			t.Errorf("%q: decoded rows differ:\nappendRow:    %+v\njson.Marshal: %+v", text, a, b)
		}
		// the same members, so a field json.Marshal writes and appendRow
		// does not is caught even when its zero value would decode equal
		var ma, mb map[string]any
		_ = json.Unmarshal(mine, &ma)
		_ = json.Unmarshal(want, &mb)
		if !reflect.DeepEqual(ma, mb) {
			t.Errorf("%q: members differ:\nappendRow:    %v\njson.Marshal: %v", text, ma, mb)
		}
		for _, c := range mine {
			if c == '\n' {
				t.Errorf("%q: the line holds a newline: %s", text, mine)
			}
		}
	}
	// omitempty and the zero row
	var zero store.UsageLog
	var a store.UsageLog
	if err := json.Unmarshal(appendRow(nil, &zero), &a); err != nil || !reflect.DeepEqual(a, zero) {
		t.Errorf("zero row: %v %+v", err, a)
	}
	want, _ := json.Marshal(&zero)
	if got := appendRow(nil, &zero); string(got) != string(want) {
		t.Errorf("zero row:\nappendRow:    %s\njson.Marshal: %s", got, want)
	}
}

func BenchmarkRowEncoding(b *testing.B) {
	row := &store.UsageLog{Key: "0a1b2c3d4e5f-1z", CreatedAt: time.Now(), UserID: 12, TokenID: 34, Model: "gpt-4o-mini",
		Channel: "openai", Endpoint: "/v1/chat/completions", PromptTokens: 1200, CompletionTokens: 300, Cost: 5400,
		Status: 200, Stream: true, LatencyMS: 812, TTFBMS: 140, RequestID: "7f9a2c1e4b6d8f0a", UpstreamRequestID: "req_abc123"}
	b.Run("appendRow", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendRow(buf[:0], row)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(row)
		}
	})
}
