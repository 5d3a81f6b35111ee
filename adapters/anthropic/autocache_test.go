package anthropic

import "testing"

func TestMarkCacheRaw(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"strings become marked blocks",
			`{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"}],"x":1}`,
			`{"model":"m","system":[{"cache_control":{"type":"ephemeral"},"text":"be brief","type":"text"}],"messages":[{"content":[{"cache_control":{"type":"ephemeral"},"text":"hi","type":"text"}],"role":"user"}],"x":1}`},
		{"the last block of arrays",
			`{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"q"},{"type":"image","source":{"type":"url","url":"u"}}]}]}`,
			`{"system":[{"type":"text","text":"a"},{"cache_control":{"type":"ephemeral"},"text":"b","type":"text"}],"messages":[{"content":[{"type":"text","text":"q"},{"cache_control":{"type":"ephemeral"},"source":{"type":"url","url":"u"},"type":"image"}],"role":"user"}]}`},
		{"a client's own breakpoint is its choice",
			`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`,
			`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`},
		{"thinking and empty text take none",
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}],"system":""}`,
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}],"system":""}`},
	} {
		got, err := markCacheRaw([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.name, got, err, tc.want)
		}
	}
}
