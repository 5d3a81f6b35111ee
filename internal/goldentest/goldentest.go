// Package goldentest holds what the adapters' golden-file tests share:
// comparing output with a file under testdata (rewritten with -update),
// rendering neutral values compactly, and small readers of test inputs.
// Only tests import it.
package goldentest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Update is the -update flag: rewrite golden files instead of comparing.
var Update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Golden compares got with the golden file, or rewrites it with -update.
// JSON is compared after indenting, so the files stay readable.
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if json.Valid(got) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, got, "", "  "); err == nil {
			got = append(buf.Bytes(), '\n')
		}
	}
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// Neutral renders a request's or answer's neutral form for a golden file,
// leaving out empty fields so the file shows what is set.
func Neutral(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		panic(err)
	}
	b, err = json.MarshalIndent(prune(tree), "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if (k == "Parameters" || k == "Schema") && val != nil {
				continue // the caller's JSON, shown as it is
			}
			val = prune(val)
			switch y := val.(type) {
			case nil:
				delete(x, k)
			case string:
				if y == "" {
					delete(x, k)
				}
			case bool:
				if !y {
					delete(x, k)
				}
			case float64:
				if y == 0 {
					delete(x, k)
				}
			case map[string]any:
				if len(y) == 0 {
					delete(x, k)
				}
			default:
				x[k] = val
			}
		}
	case []any:
		for i := range x {
			x[i] = prune(x[i])
		}
	}
	return v
}

// ChatOf is the part of a decoded request a golden file shows: Raw and
// Header are the client's own and not worth repeating.
func ChatOf(r *adapters.Request) any {
	return struct {
		Op           adapters.Operation
		Dialect      string
		Model        string
		Stream       bool
		IncludeUsage bool
		Chat         *adapters.ChatRequest
	}{r.Op, r.Dialect, r.Model, r.Stream, r.IncludeUsage, r.Chat}
}

// Inputs lists the files matching pattern, failing when there are none.
func Inputs(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no test inputs match %s", pattern)
	}
	return files
}

// Read reads a test input.
func Read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Base is a file's name without its extensions.
func Base(path string) string {
	name := filepath.Base(path)
	return name[:strings.IndexByte(name, '.')]
}

// Post is a POST request to path with header name/value pairs.
func Post(path string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

// Stem is a path without its last extension.
func Stem(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path))
}

// Drain reads a decoder to its end, copying each event (the decoder reuses
// its buffers), and returns how it ended: nil after io.EOF.
func Drain(dec *adapters.StreamDecoder) ([]*adapters.StreamEvent, error) {
	var evs []*adapters.StreamEvent
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		cp := *ev
		cp.Raw = append([]byte(nil), ev.Raw...)
		evs = append(evs, &cp)
	}
}

var createdRe = regexp.MustCompile(`"created":\s*\d+`)

// Stable blanks the "created" times encoders fill from the clock.
func Stable(b []byte) []byte {
	return createdRe.ReplaceAll(b, []byte(`"created":0`))
}

// RunStream feeds a decoder into an encoder as the relay does, and returns
// the bytes a client would get and how the decoder ended (nil after io.EOF).
func RunStream(dec *adapters.StreamDecoder, enc adapters.StreamEncoder) ([]byte, error) {
	var out []byte
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return enc.Finish(out), nil
		}
		if err != nil {
			var e *adapters.Error
			if errors.As(err, &e) {
				return enc.Error(out, e), err
			}
			return out, err
		}
		out = enc.Encode(out, ev)
	}
}
