package adapters

import (
	"bytes"
	"strings"
)

// MemberKey is a JSON member name in quotes, made once, for NamesMember.
type MemberKey []byte

// Key quotes name for NamesMember (a plain name: no quote or backslash).
func Key(name string) MemberKey { return MemberKey(`"` + name + `"`) }

// MemberValue returns data from the first byte of the value of the first
// member key that has one (a key, whitespace, a colon), whatever the
// whitespace, for a step that needs only the start of a value (a finish
// reason's word); false when no member key is there.
func MemberValue(data []byte, key MemberKey) ([]byte, bool) {
	for off := 0; ; {
		i := bytes.Index(data[off:], key)
		if i < 0 {
			return nil, false
		}
		j := skipSpace(data, off+i+len(key))
		if j < len(data) && data[j] == ':' {
			return data[skipSpace(data, j+1):], true
		}
		off += i + len(key)
	}
}

// NamesMember is the cheap test a stream step makes of every event before
// parsing one: whether data has a member key (at any depth) whose value
// starts with one of the bytes in first, whatever the whitespace around
// the colon (`"usage":{`, `"usage": {`, `"usage" :{` alike, as Python's
// json.dumps and many servers write them). It reads no more than the
// search for the key: a key inside a string has its quotes escaped, so it
// cannot match, and a string value is never followed by a colon. A hit
// only says the event is worth parsing; the parse has the last word.
func NamesMember(data []byte, key MemberKey, first string) bool {
	for off := 0; ; {
		i := bytes.Index(data[off:], key)
		if i < 0 {
			return false
		}
		j := skipSpace(data, off+i+len(key))
		if j < len(data) && data[j] == ':' {
			if j = skipSpace(data, j+1); j < len(data) && strings.IndexByte(first, data[j]) >= 0 {
				return true
			}
		}
		off += i + len(key)
	}
}
