package openai

import (
	"encoding/json"
	"testing"
)

// plainString takes only strings json.Unmarshal reads as they are, and
// reads them alike.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"Say hello"`, `"a\"b"`, `"é"`, "\"\xff\"", "\"\x01\"", `"`, `""`, `"a"b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := plainString(b)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil || got != want {
			t.Fatalf("plainString(%q) = %q; json.Unmarshal %q, %v", b, got, want, err)
		}
	})
}
