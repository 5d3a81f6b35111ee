package openai

import (
	"bytes"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// chunkMarks is what Probe looks for in every chunk of a stream relayed as
// it is: whether it names an error object or string (head's test), how
// its first finish reason ends the stream (finishEnd's), and whether it
// names a usage object (worth parsing).
type chunkMarks struct {
	err   bool
	end   adapters.StreamEnd
	usage bool
}

// markChunk makes the three byte searches of head, finishEnd and Probe
// (adapters.NamesMember and MemberValue) in one pass: every quote of the
// chunk is a place one of the keys may start, and each search alone walked
// them all (a search for a needle starting with a quote, JSON's commonest
// byte, stops at each). It finds exactly what the three searches find.
func markChunk(data []byte) chunkMarks {
	m := chunkMarks{end: adapters.StreamGoesOn}
	finishSeen := false
	// from[k] is where the search for key k resumes: each search goes on
	// after the whole key it found, so a key's closing quote never starts
	// another of the same key (`"usage"usage":{` holds none for it)
	var from [3]int
	for i := 0; i+1 < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		var key []byte
		var k int
		switch data[i+1] {
		case 'e':
			key, k = errorKey, 0
		case 'f':
			key, k = finishKey, 1
		case 'u':
			key, k = usageKey, 2
		default:
			continue
		}
		if i < from[k] || !bytes.HasPrefix(data[i:], key) {
			continue
		}
		from[k] = i + len(key)
		j := skipBlank(data, i+len(key))
		if j >= len(data) || data[j] != ':' {
			continue
		}
		j = skipBlank(data, j+1)
		switch data[i+1] {
		case 'e':
			m.err = m.err || (j < len(data) && (data[j] == '{' || data[j] == '"'))
		case 'f':
			if !finishSeen {
				finishSeen = true
				if v := data[j:]; len(v) > 0 && v[0] == '"' && !bytes.HasPrefix(v, []byte(`"error"`)) {
					m.end = adapters.StreamMayEnd
				}
			}
		case 'u':
			m.usage = m.usage || (j < len(data) && data[j] == '{')
		}
	}
	return m
}

func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
