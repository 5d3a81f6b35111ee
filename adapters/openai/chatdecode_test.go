package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// chatShapes are chat request bodies the hand-read path must decode as
// json.Unmarshal does, or leave to it. fast says which of the two.
var chatShapes = []struct {
	body string
	fast bool
}{
	{`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}`, true},
	{`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`, true},
	{` { "model" : "m" , "messages" : [ { "role" : "system" , "content" : "line\none \"q\" \u00e9 \ud83d\ude00" } , {"role":"user","content":[]} ] } `, true},
	{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, true},
	{`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"index":2,"function":null}],"refusal":null,"reasoning_content":"hm","annotations":[]},{"role":"tool","tool_call_id":"c1","content":"42","name":"f"}]}`, true},
	{`{"model":"m","messages":[{"role":"assistant","content":"","refusal":"no","reasoning":"r","annotations":null},{"role":"assistant","reasoning":{"x":1}}]}`, true},
	{`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}},{"type":"web_search"}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`, true},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"auto","max_tokens":100,"max_completion_tokens":-5,"temperature":0.7,"top_p":1e-3,"stop":["a","b"],"n":2,"seed":-9223372036854775808,"presence_penalty":-2.0,"frequency_penalty":0,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":null}},"reasoning_effort":"low","user":"u","prompt_cache_key":"k"}`, true},
	{`{"model":"m","messages":null,"stream":null,"stream_options":null,"tools":null,"tool_choice":null,"parallel_tool_calls":null,"max_tokens":null,"temperature":null,"stop":null,"response_format":null,"user":null}`, true},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"stop":"end","response_format":{"type":"text","json_schema":null},"metadata":{"a":"b"},"logit_bias":{"1":-100},"store":true,"extra":[1,{"model":"no"},"]}"]}`, true},
	{"{\"model\":\"m\\u0000\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe \xe2\x82\"}]}", true},
	{`{"model":"m","messages":[],"tool_choice":  {"type" : "x"}  }`, true},
	// left to encoding/json: folded, escaped or repeated keys, types it
	// refuses or converts, null elements
	{`{"Model":"m","messages":[]}`, false},
	{`{"mod\u0065l":"m","messages":[]}`, false},
	{`{"model":"a","model":"b","messages":[]}`, false},
	{`{"model":"m","messages":[{"role":"user","ROLE":"x"}]}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1e3}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999999999}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1e999}`, false},
	{`{"model":5,"messages":[]}`, false},
	{`{"model":"m","messages":[null]}`, false},
	{`{"model":"m","messages":{}}`, false},
	{`{"model":"m","messages":[{"role":"user","content":5}]}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"stop":[null]}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}],"stop":5}`, false},
	{`{"model":"m","messages":[],"ſtream":true}`, false},
	{`[{"model":"m"}]`, false},
	{`null`, false},
	// not JSON
	{`{"model":"m","messages":[}`, false},
	{`{"model":"m","messages":[]}x`, false},
	{`{"model":"m","messages":[],"x":tru}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"a` + "\n" + `"}]}`, false},
	{``, false},
	{`   `, false},
	// not JSON, in places the reader checks as it goes (it takes no
	// separate validating pass)
	{`{"model":"m","messages":[],"x":"\q"}`, false},
	{`{"model":"m","messages":[],"x":"\u12g4"}`, false},
	{`{"model":"m","messages":[],"x":"\u12"}`, false},
	{"{\"model\":\"m\",\"messages\":[],\"x\":\"a\tb\"}", false},
	{`{"model":"m","messages":[],"x":01}`, false},
	{`{"model":"m","messages":[],"x":1.}`, false},
	{`{"model":"m","messages":[],"x":-}`, false},
	{`{"model":"m","messages":[],"x":.5}`, false},
	{`{"model":"m","messages":[],"x":1e}`, false},
	{`{"model":"m","messages":[],"x":+1}`, false},
	{`{"model":"m","messages":[],"x":nul}`, false},
	{`{"model":"m","messages":[],"stream":tru}`, false},
	{`{"model":"m","messages":[],"stream":nulL}`, false},
	{`{"model":"m","messages":[],"stop":[1,]}`, false},
	{`{"model":"m","messages":[],"x":[1,]}`, false},
	{`{"model":"m","messages":[],"x":{"a":1,}}`, false},
	{`{"model":"m","messages":[],}`, false},
	{`{"model":"m","messages":[,]}`, false},
	{`{"model":"m" "messages":[]}`, false},
	{`{"model":"m","messages":[],"x":{"a" 1}}`, false},
	{`{"model":"m","messages":[],"x":{1:1}}`, false},
	{`{"model":"m","messages":[]}` + "\x00", false},
	{"\xef\xbb\xbf" + `{"model":"m","messages":[]}`, false},
	{`{"model":"m","messages":[{"role":"user","content":"x"}` + "\x00" + `]}`, false},
	{`{"model":"m","messages":[],"max_tokens":-0,"temperature":-0.0e+0,"x":[0,-1.5E-3,true,false,null,{},[],"",{"a":[{"b":null}]}]}`, true},
	{`{"model":"m","messages":[],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, false},
	{`{"model":"m","messages":[],"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, true},
}

// TestDecodeChatMatchesEncodingJSON: the hand-read path fills the request
// exactly as json.Unmarshal does, takes the shapes it is meant to and
// leaves the others, and a body either refuses gets encoding/json's error.
func TestDecodeChatMatchesEncodingJSON(t *testing.T) {
	bodies := map[string]bool{}
	for _, s := range chatShapes {
		bodies[s.body] = s.fast
	}
	golden, _ := filepath.Glob("testdata/decode/*.json")
	if len(golden) == 0 {
		t.Fatal("no testdata/decode/*.json")
	}
	for _, p := range golden {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bodies[string(b)] = true
	}
	for body, wantFast := range bodies {
		checkDecodeChat(t, []byte(body), wantFast)
	}
}

func checkDecodeChat(t *testing.T, body []byte, wantFast bool) {
	t.Helper()
	var want chatRequest
	wantErr := adapters.DecodeJSON(body, &want)
	var got chatRequest
	gotErr := decodeChat(body, &got)
	if !reflect.DeepEqual(errText(gotErr), errText(wantErr)) {
		t.Errorf("%s: error %v, encoding/json's %v", body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s:\n got %s %+v\nwant %s %+v", body, g, got, w, want)
	}
	r := jsonReader{b: body, ok: json.Valid(body)}
	var fast chatRequest
	if r.ok {
		r.chat(&fast)
	}
	if r.ok != wantFast {
		t.Errorf("%s: read by hand %v, want %v", body, r.ok, wantFast)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzDecodeChat: for any body, the hand-read path and encoding/json agree.
func FuzzDecodeChat(f *testing.F) {
	for _, s := range chatShapes {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want chatRequest
		wantErr := adapters.DecodeJSON(body, &want)
		var got chatRequest
		gotErr := decodeChat(body, &got)
		if errText(gotErr) != errText(wantErr) {
			t.Fatalf("%q: error %v, encoding/json's %v", body, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", body, got, want)
		}
	})
}

// BenchmarkDecodeChat prices a short chat request's decode by hand and by
// encoding/json, the bench's own body.
func BenchmarkDecodeChat(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w chatRequest
			if err := decodeChat(body, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w chatRequest
			if err := adapters.DecodeJSON(body, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
