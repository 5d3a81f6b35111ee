package openai

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// imageMeter reads an images answer as it streams to the client: it counts
// the objects of the top-level "data" array and keeps the raw values of
// the few top-level members billing needs (created, size, quality,
// usage), skipping the base64 images without holding them. It is a small
// JSON scanner: strings (and the escapes in them), nesting depth, and at
// the top level which member a value belongs to.
type imageMeter struct {
	depth      int
	inString   bool
	escaped    bool
	expectKey  bool // at the top level, the next string is a member's name
	readingKey bool
	key        []byte
	member     string // the top-level member whose value is being read
	capturing  bool
	value      []byte
	raws       map[string][]byte
	inData     bool
	images     int64
	started    bool
	overflow   bool
}

// meteredMembers are the top-level members kept, each at most
// maxMeteredValue bytes.
var meteredMembers = map[string]bool{"created": true, "size": true, "quality": true, "usage": true}

const maxMeteredValue = 16 << 10

// NewMediaMeter implements adapters.MediaMeter: an images answer to an
// OpenAI client is streamed through; a transcription is decoded whole.
func (Adapter) NewMediaMeter(req *adapters.Request) adapters.MediaMeterWriter {
	if req.Op != adapters.OpImage || req.Dialect != Name {
		return nil
	}
	return &imageMeter{raws: map[string][]byte{}}
}

func (m *imageMeter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if m.inString {
			if !m.readingKey && !m.capturing && !m.escaped {
				// skip the string's plain bytes at once (the images)
				j := bytes.IndexAny(p[i:], `"\`)
				if j < 0 {
					break
				}
				i += j
				c = p[i]
			}
			if m.capturing {
				m.keep(c)
			}
			switch {
			case m.escaped:
				m.escaped = false
				if m.readingKey && len(m.key) < 64 {
					m.key = append(m.key, c)
				}
			case c == '\\':
				m.escaped = true
			case c == '"':
				m.inString = false
				if m.readingKey {
					m.readingKey, m.member = false, string(m.key)
				}
			case m.readingKey && len(m.key) < 64:
				m.key = append(m.key, c)
			}
			continue
		}
		if m.capturing && m.depth == 1 && (c == ',' || c == '}') {
			m.raws[m.member] = append([]byte(nil), m.value...)
			m.capturing = false
		}
		if m.capturing {
			m.keep(c)
		}
		switch c {
		case '"':
			m.inString = true
			if m.depth == 1 && m.expectKey {
				m.readingKey, m.expectKey, m.key = true, false, m.key[:0]
			}
		case '{', '[':
			if m.inData && m.depth == 2 && c == '{' {
				m.images++
			}
			m.depth++
			switch {
			case m.depth == 1 && c == '{':
				m.started, m.expectKey = true, true
			case m.depth == 2 && c == '[' && m.member == "data":
				m.inData = true
			}
		case '}', ']':
			m.depth--
			if m.depth <= 1 {
				m.inData = false
			}
		case ',':
			if m.depth == 1 {
				m.expectKey = true
			}
		case ':':
			if m.depth == 1 && meteredMembers[m.member] {
				m.capturing, m.value = true, m.value[:0]
			}
		}
	}
	return len(p), nil
}

func (m *imageMeter) keep(c byte) {
	if len(m.value) < maxMeteredValue {
		m.value = append(m.value, c)
	} else {
		m.overflow = true
	}
}

// Result implements adapters.MediaMeterWriter.
func (m *imageMeter) Result() (*adapters.MediaResponse, error) {
	resp := &adapters.MediaResponse{Dialect: Name, ContentType: "application/json"}
	resp.Media.Images = m.images
	var w imagesResponse
	for name, raw := range m.raws {
		var err error
		switch name {
		case "created":
			err = json.Unmarshal(raw, &w.Created)
		case "size":
			err = json.Unmarshal(raw, &w.Size)
		case "quality":
			err = json.Unmarshal(raw, &w.Quality)
		case "usage":
			err = json.Unmarshal(raw, &w.Usage)
		}
		if err != nil {
			return resp, errors.New("upstream answered an unreadable " + name)
		}
	}
	resp.Created, resp.Media.Size, resp.Media.Quality = w.Created, w.Size, w.Quality
	if u := w.Usage; u != nil {
		resp.Usage = adapters.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens}
		resp.Media.ImageInputTokens = u.InputTokensDetails.ImageTokens
	}
	switch {
	case !m.started || m.depth != 0 || m.inString:
		return resp, errors.New("upstream's images answer ended before its end")
	case m.overflow:
		return resp, errors.New("upstream's images answer has a member too large to read")
	}
	return resp, nil
}

var _ adapters.MediaMeter = Adapter{}
