package adaptertest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func seeds(f *testing.F, pattern string) {
	f.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		f.Fatalf("no fuzz seeds match %s", pattern)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecodeRequest fuzzes a family's client-body decoder, seeded with its
// testdata/decode/*.json, for every request in testdata/<name>.http: a
// refusal is a 4xx *adapters.Error, a body that decodes passes through to
// the family's own provider (with its model and another), and no
// translation to any registered provider panics. Add extra seeds with
// f.Add before calling it.
func FuzzDecodeRequest(f *testing.F, name string) {
	self := family(f, name)
	k := &kit{s: Suite{Name: name, Testdata: "testdata"}, self: self, requests: map[string][]*http.Request{}}
	k.all, _ = Families()
	requests := k.clientRequests(f, self)
	seeds(f, filepath.Join("testdata", "decode", "*.json"))
	upstreams := k.upstreams()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range requests {
			op, ok := self.Dialect.Route(r)
			if !ok {
				t.Fatalf("%s does not route its own request %s %s", name, r.Method, r.URL)
			}
			req, err := self.Dialect.DecodeRequest(op, body, r.Clone(context.Background()))
			if err != nil {
				var e *adapters.Error
				if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
					t.Fatalf("%s: decode error is not a 4xx *adapters.Error: %#v", op, err)
				}
				continue
			}
			for _, model := range []string{req.Model, "fuzz-upstream-model"} {
				up := &adapters.Upstream{Channel: "fuzz", BaseURL: "http://127.0.0.1:1", Key: "k", Model: model}
				if _, err := self.Chat.NewRequest(offline(), up, req); err != nil {
					t.Fatalf("%s: passthrough of a decoded body failed: %v", op, err)
				}
			}
			dialect := req.Dialect
			for _, p := range upstreams {
				req.Dialect = translated
				up := &adapters.Upstream{Channel: "fuzz", BaseURL: "http://127.0.0.1:1", Key: "k", Model: "m"}
				_, _ = p.Chat.NewRequest(offline(), up, req)
			}
			req.Dialect = dialect
		}
	})
}

// FuzzStreamDecoder fuzzes a family's stream decoder, seeded with its
// testdata/stream/*.<name>.sse, feeding every registered dialect's encoder
// (its own in passthrough), with and without usage asked for: nothing
// panics and the decoder ends. The same bytes go to its answer and error
// decoders.
func FuzzStreamDecoder(f *testing.F, name string) {
	FuzzStreamDecoderIn(f, name, "testdata")
}

// FuzzStreamDecoderIn is FuzzStreamDecoder for a family whose fixtures
// are under testdata (Suite.Testdata), and its error fixtures
// (<testdata>/error/*.json, a provider-only family's) seeds too.
func FuzzStreamDecoderIn(f *testing.F, name, testdata string) {
	self := family(f, name)
	all, _ := Families()
	if errs, _ := filepath.Glob(filepath.Join(testdata, "error", "*.json")); len(errs) > 0 {
		seeds(f, filepath.Join(testdata, "error", "*.json"))
	}
	seeds(f, filepath.Join(testdata, "stream", "*."+name+".sse"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, d := range all {
			if d.Dialect == nil {
				continue
			}
			for _, includeUsage := range []bool{false, true} {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: d.Name, Model: "m", Stream: true, IncludeUsage: includeUsage}
				dec := adapters.DecodeStream(self.Chat, req, bytes.NewReader(stream))
				enc := d.Dialect.NewStreamEncoder(req)
				var out []byte
				for i := 0; ; i++ {
					if i > 4*len(stream)+16 {
						t.Fatalf("%s: the decoder does not end", d.Name)
					}
					ev, err := dec.Next()
					if err != nil {
						break
					}
					out = enc.Encode(out, ev)
				}
				out = enc.Finish(out)
				_ = enc.Error(out, &adapters.Error{Status: 502, Message: "x"})
				_ = dec.PartialText()
				dec.Release()
			}
			req := &adapters.Request{Op: adapters.OpChat, Dialect: decodingDialect(name, d.Name), Model: "m"}
			if resp, err := self.Chat.DecodeResponse(req, stream); err == nil {
				req.Dialect = d.Name
				_, _ = d.Dialect.EncodeResponse(req, resp)
			}
		}
		_ = self.Provider.DecodeError(500, stream)
	})
}
