package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The Vertex kit checks a family that serves other vendors' wires from a
// cloud's publisher paths (Vertex AI: Gemini's at publishers/google,
// Anthropic's Messages at publishers/anthropic) against fixtures under
// <Testdata>/vertex:
//
//	request/NAME.json   {"options": the module's JSON options, "dialect":
//	                    the client's, "path": where it sent its body, "op":
//	                    chat (default), count_tokens or image, "model": the
//	                    upstream model, "body": the client's body}
//	  NAME.golden         → the request the provider builds
//	response/NAME.json  {"options", "model", "dialect": the client's ("" for
//	                    one of another dialect), "op" (image: a media
//	                    answer), "body": the answer}
//	  NAME.golden         → the neutral answer, marked when relayed as it is
//	stream/NAME.<publisher>.sse   a publisher's stream (a leading SSE
//	                              comment may name its source)
//	  NAME.<publisher>.golden     → the neutral events and how it ended
//	error/NAME.json     {"status", "body"}
//	  NAME.golden         → DecodeError's *adapters.Error
//
// Besides the goldens: every request goes to
// /v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}
// with the options' project and location, a stream to the streaming
// method (Gemini's with alt=sse); no key travels in the request built (the
// family's transport adds a short-lived token), nor any other vendor's
// credential or version header; a Claude body carries AnthropicVersion
// and (but for counting) no model; an answer or stream in the client's
// own dialect comes back byte for byte with the usage a translated one
// has; each operation in Refused is refused with a 4xx.

// VertexSuite describes a publisher-path family for RunVertex.
type VertexSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/vertex.
	Testdata string
	// AnthropicVersion is the anthropic_version a Claude body carries.
	AnthropicVersion string
	// Refused are the operations the family does not serve.
	Refused []adapters.Operation
}

type vertexFixture struct {
	Options json.RawMessage    `json:"options"`
	Dialect string             `json:"dialect"`
	Path    string             `json:"path"`
	Op      adapters.Operation `json:"op"`
	Model   string             `json:"model"`
	Body    json.RawMessage    `json:"body"`
}

var publisherPath = regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/publishers/(google|anthropic)/models/([^/:]+):([A-Za-z]+)$`)

// RunVertex checks a publisher-path family's whole contract against its
// fixtures. Call it once from the family's tests.
func RunVertex(t *testing.T, s VertexSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.AnthropicVersion == "" {
		t.Fatal("adaptertest: VertexSuite.AnthropicVersion is required")
	}
	dir := filepath.Join(s.Testdata, "vertex")
	checked := map[string]bool{}
	t.Run("refused", func(t *testing.T) {
		p := loadProvider(t, s.Name, nil)
		for _, op := range s.Refused {
			up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: "gemini-2.5-flash"}
			_, err := p.NewRequest(context.Background(), up, &adapters.Request{Op: op, Dialect: "openai", Model: "m", Raw: []byte(`{}`)})
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
				t.Errorf("%s: got %v, want a 4xx *adapters.Error", op, err)
			}
		}
	})
	t.Run("request", func(t *testing.T) {
		eachFixture(t, filepath.Join(dir, "request"), checked, func(t *testing.T, raw []byte, golden string) {
			var f vertexFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			if f.Op == "" {
				f.Op = adapters.OpChat
			}
			d := family(t, f.Dialect)
			if d.Dialect == nil {
				t.Fatalf("%s is no dialect", f.Dialect)
			}
			hreq := goldentest.Post(f.Path, "Anthropic-Version", "2023-06-01")
			req, err := d.Dialect.DecodeRequest(f.Op, f.Body, hreq)
			if err != nil {
				t.Fatalf("the %s dialect refuses the fixture's body: %v", f.Dialect, err)
			}
			p := loadChannel(t, s.Name, f.Options, f.Model)
			up := &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: f.Model}
			hr, err := p.NewRequest(context.Background(), up, req)
			if err != nil {
				t.Fatalf("NewRequest: %v", err)
			}
			do := &recorder{answers: []answer{{Status: 200}}}
			_, _ = do.Do(hr)
			checkPublisherRequest(t, &s, &f, req, do.calls[0])
			var out strings.Builder
			do.render(&out, kitKey)
			goldentest.Golden(t, golden, []byte(out.String()))
		})
	})
	t.Run("response", func(t *testing.T) {
		eachFixture(t, filepath.Join(dir, "response"), checked, func(t *testing.T, raw []byte, golden string) {
			var f vertexFixture
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			p := loadChannel(t, s.Name, f.Options, f.Model)
			dialect := f.Dialect
			if dialect == "" {
				dialect = translated
			}
			body := rawBody(f.Body)
			if f.Op == adapters.OpImage {
				mp, ok := p.(adapters.MediaProvider)
				if !ok {
					t.Fatalf("an image answer, and %s is no media provider", s.Name)
				}
				m, err := mp.DecodeMediaResponse(&adapters.Request{Op: adapters.OpImage, Dialect: "openai", Model: f.Model, Media: &adapters.MediaRequest{N: 1}}, body)
				if err != nil {
					t.Fatalf("DecodeMediaResponse: %v", err)
				}
				m.Created = 0 // the clock's, when the answer has no time
				goldentest.Golden(t, golden, goldentest.Neutral(m))
				return
			}
			resp, err := p.DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: dialect, Model: f.Model}, body)
			if err != nil {
				t.Fatalf("DecodeResponse: %v", err)
			}
			passthrough := resp.Raw != nil
			if passthrough != (dialect == p.WireDialect()) {
				t.Errorf("a %s client's answer relayed as it is: %v; the wire is %s", dialect, passthrough, p.WireDialect())
			}
			if passthrough {
				if !bytes.Equal(resp.Raw, body) || resp.Dialect != dialect {
					t.Errorf("the relayed answer is not the upstream's bytes")
				}
				neutral, err := p.DecodeResponse(&adapters.Request{Op: adapters.OpChat, Dialect: translated, Model: f.Model}, body)
				if err != nil || neutral.Usage != resp.Usage {
					t.Errorf("passthrough usage %+v, translated %+v (%v)", resp.Usage, neutral, err)
				}
			}
			resp.Raw = nil
			got := goldentest.Neutral(resp)
			if passthrough {
				got = append([]byte("# the body is relayed as it is\n"), got...)
			}
			goldentest.Golden(t, golden, got)
		})
	})
	t.Run("stream", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "stream", "*.sse"))
		for _, in := range files {
			stem := strings.TrimSuffix(in, ".sse")
			publisher := filepath.Ext(stem)
			t.Run(filepath.Base(stem), func(t *testing.T) {
				if publisher != ".google" && publisher != ".anthropic" {
					t.Fatalf("%s: name it NAME.google.sse or NAME.anthropic.sse", in)
				}
				checked[stem+".golden"] = true
				opts, _ := json.Marshal(map[string]string{"publisher": publisher[1:], "project": "kit-project"})
				p := loadChannel(t, s.Name, opts, "")
				stream := goldentest.Read(t, in)
				req := &adapters.Request{Op: adapters.OpChat, Dialect: translated, Model: "client-model", Stream: true}
				evs, err := goldentest.Drain(adapters.DecodeStream(p, req, bytes.NewReader(stream)))
				end := streamEnd{Events: evs, End: "EOF"}
				if err != nil {
					end.End = err.Error()
					errors.As(err, &end.Error)
				}
				var usage *adapters.Usage
				for _, ev := range evs {
					if ev.Usage != nil {
						usage = ev.Usage
					}
				}
				goldentest.Golden(t, stem+".golden", goldentest.Neutral(end))
				// the publisher's own clients get its frames as they came
				wire := p.WireDialect()
				preq := &adapters.Request{Op: adapters.OpChat, Dialect: wire, Model: "client-model", Stream: true, IncludeUsage: true}
				pevs, _ := goldentest.Drain(adapters.DecodeStream(p, preq, bytes.NewReader(stream)))
				var relayed []byte
				var pusage *adapters.Usage
				for _, ev := range pevs {
					if ev.Dialect != wire || ev.Raw == nil {
						t.Errorf("a passthrough event without the upstream's frame: %+v", ev)
					}
					if ev.Usage != nil {
						pusage = ev.Usage
					}
					relayed = append(relayed, ev.Raw...)
				}
				if !bytes.HasPrefix(withoutSource(stream), relayed) {
					t.Errorf("the relayed frames differ from the upstream's stream:\n%s", relayed)
				}
				if (usage == nil) != (pusage == nil) || (usage != nil && *usage != *pusage) {
					t.Errorf("passthrough usage %+v, translated %+v", pusage, usage)
				}
			})
		}
	})
	t.Run("error", func(t *testing.T) {
		checkErrors(t, filepath.Join(dir, "error"), checked, loadProvider(t, s.Name, nil).(adapters.Provider).DecodeError)
	})
	if t.Failed() {
		return
	}
	t.Run("coverage", func(t *testing.T) {
		for _, sub := range []string{"request", "response", "error"} {
			if fixtureCount(filepath.Join(dir, sub)) == 0 {
				t.Errorf("no %s fixture in %s", sub, filepath.Join(dir, sub))
			}
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "stream", "*.sse")); len(files) == 0 {
			t.Errorf("no stream fixture in %s", filepath.Join(dir, "stream"))
		}
		uncheckedGoldens(t, checked, filepath.Join(dir, "request"), filepath.Join(dir, "response"), filepath.Join(dir, "stream"), filepath.Join(dir, "error"))
	})
}

// checkPublisherRequest holds a built request to its publisher's path,
// with no credential and, for Claude, Vertex's version in the body.
func checkPublisherRequest(t *testing.T, s *VertexSuite, f *vertexFixture, req *adapters.Request, c call) {
	t.Helper()
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	m := publisherPath.FindStringSubmatch(u.EscapedPath())
	if m == nil {
		t.Fatalf("path %s is no publisher model's", u.EscapedPath())
	}
	var opts struct{ Project, Location string }
	_ = json.Unmarshal(f.Options, &opts)
	if m[1] != opts.Project || m[2] != opts.Location {
		t.Errorf("project %q location %q, want the options' %q %q", m[1], m[2], opts.Project, opts.Location)
	}
	publisher, model, method := m[3], m[4], m[5]
	var body map[string]json.RawMessage
	_ = json.Unmarshal(c.body, &body)
	switch publisher {
	case "google":
		want := map[bool]string{false: "generateContent", true: "streamGenerateContent"}[req.Stream]
		switch {
		case f.Op == adapters.OpCountTokens:
			want = "countTokens"
		case f.Op == adapters.OpImage && strings.HasPrefix(model, "imagen-"):
			want = "predict"
		}
		if method != want || (req.Stream && u.Query().Get("alt") != "sse") {
			t.Errorf("method %s?%s, want %s", method, u.RawQuery, want)
		}
	case "anthropic":
		if v := string(body["anthropic_version"]); v != `"`+s.AnthropicVersion+`"` {
			t.Errorf("anthropic_version %s, want %q", v, s.AnthropicVersion)
		}
		want := map[bool]string{false: "rawPredict", true: "streamRawPredict"}[req.Stream]
		_, named := body["model"]
		if f.Op == adapters.OpCountTokens {
			if model != "count-tokens" || method != "rawPredict" || !named {
				t.Errorf("a count goes to count-tokens:rawPredict naming its model, not %s:%s", model, method)
			}
		} else if method != want || named {
			t.Errorf("method %s (want %s), model in the body: %v", method, want, named)
		}
	}
	for name, vs := range c.header {
		switch http.CanonicalHeaderKey(name) {
		case "Authorization", "X-Goog-Api-Key", "X-Api-Key", "Api-Key", "Anthropic-Version":
			t.Errorf("the request built carries %s: the family's transport authenticates it", name)
		}
		for _, v := range vs {
			if strings.Contains(v, kitKey) {
				t.Errorf("the channel's key travels in %s", name)
			}
		}
	}
	if strings.Contains(c.url, kitKey) || bytes.Contains(c.body, []byte(kitKey)) {
		t.Error("the channel's key travels in the URL or the body")
	}
}

// withoutSource is a stream fixture without its leading comment, which
// names where it comes from and which no decoder relays.
func withoutSource(stream []byte) []byte {
	for bytes.HasPrefix(stream, []byte(":")) {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return nil
		}
		stream = stream[i+1:]
	}
	return bytes.TrimLeft(stream, "\r\n")
}

// loadChannel provisions the family as a channel serving model loads it:
// its options, then (adapters.ChannelProvisioner) the channel's models,
// without keys.
func loadChannel(t *testing.T, name string, options json.RawMessage, model string) adapters.ChatProvider {
	t.Helper()
	p := loadProvider(t, name, options)
	if cp, ok := p.(adapters.ChannelProvisioner); ok {
		ch := adapters.ChannelSettings{Name: "kit", BaseURL: BaseURL}
		if model != "" {
			ch.Models = []string{model}
		}
		if err := cp.ProvisionChannel(ch); err != nil {
			t.Fatalf("ProvisionChannel: %v", err)
		}
	}
	return p
}
