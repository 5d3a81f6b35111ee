package adapters

import "testing"

func TestNamesMember(t *testing.T) {
	usage := Key("usage")
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"usage":{"prompt_tokens":1}}`, true},
		{`{"usage": {"prompt_tokens": 1}}`, true},
		{"{\"usage\"\t:\r\n {\"prompt_tokens\":1}}", true},
		{`{"usage":{}, "id":"x"}`, true},
		{`{"choices":[{"usage":{}}]}`, true}, // any depth: the parse decides
		{`{"usage":null}`, false},
		{`{"usage": null, "id": "x"}`, false},
		{`{"content":"usage"}`, false},
		{`{"content":"\"usage\": {"}`, false}, // a key's quotes in a string are escaped
		{`{"content":"usage:{", "usage": {}}`, true},
		{`{"usage_x":{}}`, false},
		{`{"x":"usage", "usage" : {}}`, true},
		{`{"usage"`, false},
		{`{"usage":`, false},
		{``, false},
	} {
		if got := NamesMember([]byte(c.data), usage, "{"); got != c.want {
			t.Errorf("NamesMember(%s) = %v, want %v", c.data, got, c.want)
		}
	}
	if !NamesMember([]byte(`{"error": "boom"}`), Key("error"), `{"`) || NamesMember([]byte(`{"error": null}`), Key("error"), `{"`) {
		t.Error("the value's first byte is not checked")
	}
}

func BenchmarkNamesMember(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-Ca4CHeDUsAgE","object":"chat.completion.chunk","created":1741569952,"model":"o4-mini-2025-04-16","service_tier":"default","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Yes, 97 is prime."},"logprobs":null,"finish_reason":null}],"usage":null}`)
	key := Key("usage")
	b.ReportAllocs()
	for b.Loop() {
		if NamesMember(chunk, key, "{") {
			b.Fatal("found")
		}
	}
}
