package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

var (
	ant adapters.Dialect = anthropic.Adapter{}
	oai adapters.Dialect = openai.Adapter{}
	gem adapters.Dialect = gemini.Adapter{}
)

func providerOf(d adapters.Dialect) adapters.Provider { return d.(adapters.Provider) }

// decodeAny decodes a test input by its suffix: name.openai.json is an
// OpenAI chat request, name.gemini.json a Gemini generateContent body.
func decodeAny(t *testing.T, path string) *adapters.Request {
	t.Helper()
	body := read(t, path)
	var req *adapters.Request
	var err error
	switch {
	case strings.HasSuffix(path, ".openai.json"):
		req, err = oai.DecodeRequest(adapters.OpChat, body, post("/v1/chat/completions"))
	case strings.HasSuffix(path, ".gemini.json"):
		req, err = gem.DecodeRequest(adapters.OpChat, body, post("/v1beta/models/gemini-2.5-flash:generateContent"))
	default:
		req, err = ant.DecodeRequest(adapters.OpChat, body, post("/v1/messages", "anthropic-version", "2023-06-01"))
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return req
}

// Anthropic request → neutral.
func TestDecodeRequestGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/decode/*.json") {
		t.Run(base(in), func(t *testing.T) {
			req := decodeAny(t, in)
			golden(t, strings.TrimSuffix(in, ".json")+".neutral.golden", neutral(chatOf(req)))
		})
	}
}

// OpenAI and Gemini requests → neutral → Anthropic request.
func TestEncodeRequestGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/encode/*.json") {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(in, "testdata/encode/"), ".json"), func(t *testing.T) {
			req := decodeAny(t, in)
			body, err := anthropic.EncodeChatRequest(req, "claude-sonnet-4-5")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(in, ".json")+".anthropic.golden", body)
			count, err := anthropic.EncodeCountTokensRequest(req, "claude-sonnet-4-5")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(in, ".json")+".count.golden", count)
		})
	}
}

// Answers: Anthropic's → neutral → OpenAI's and Gemini's; OpenAI's and
// Gemini's → neutral → Anthropic's.
func TestResponseGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/response/*.json") {
		name := strings.TrimSuffix(in, ".json")
		t.Run(strings.TrimPrefix(name, "testdata/response/"), func(t *testing.T) {
			body := read(t, in)
			var from adapters.Provider
			var to []adapters.Dialect
			switch {
			case strings.HasSuffix(in, ".anthropic.json"):
				from, to = providerOf(ant), []adapters.Dialect{oai, gem}
			case strings.HasSuffix(in, ".openai.json"):
				from, to = providerOf(oai), []adapters.Dialect{ant}
			default:
				from, to = providerOf(gem), []adapters.Dialect{ant}
			}
			for _, d := range to {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: d.Name(), Model: "client-model"}
				resp, err := from.DecodeResponse(req, body)
				if err != nil {
					t.Fatal(err)
				}
				if d == to[0] {
					golden(t, name+".neutral.golden", neutral(resp))
				}
				out, err := d.EncodeResponse(req, resp)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".to-"+d.Name()+".golden", goldentest.Stable(out))
			}
		})
	}
}

// Streams: Anthropic's events → OpenAI chunks and Gemini chunks; OpenAI
// chunks → Anthropic events.
func TestStreamGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/stream/*.sse") {
		name := strings.TrimSuffix(in, ".sse")
		t.Run(strings.TrimPrefix(name, "testdata/stream/"), func(t *testing.T) {
			var from adapters.Provider
			var to []adapters.Dialect
			if strings.HasSuffix(in, ".anthropic.sse") {
				from, to = providerOf(ant), []adapters.Dialect{oai, gem}
			} else {
				from, to = providerOf(oai), []adapters.Dialect{ant}
			}
			for _, d := range to {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: d.Name(), Model: "client-model", Stream: true, IncludeUsage: true}
				out, err := goldentest.RunStream(from.NewStreamDecoder(req, bytes.NewReader(read(t, in))), d.NewStreamEncoder(req))
				if err != nil {
					out = append(out, "# decoder error: "+err.Error()+"\n"...)
				}
				golden(t, name+".to-"+d.Name()+".golden", goldentest.Stable(out))
			}
		})
	}
}

// The stream decoder reports a cut-off stream and an upstream error, not a
// normal end.
func TestStreamEnds(t *testing.T) {
	for _, dialect := range []string{"anthropic", "openai"} {
		req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}
		dec := providerOf(ant).NewStreamDecoder(req, bytes.NewReader(read(t, "testdata/stream/truncated.anthropic.sse")))
		if _, err := drain(dec); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: truncated stream gave %v, want io.ErrUnexpectedEOF", dialect, err)
		}
		if pt, ok := dec.(adapters.PartialText); !ok || (dialect == "anthropic" && pt.PartialText() != "Par") {
			t.Errorf("%s: partial text of a cut-off passthrough stream", dialect)
		}
		dec = providerOf(ant).NewStreamDecoder(req, bytes.NewReader(read(t, "testdata/stream/error.anthropic.sse")))
		_, err := drain(dec)
		var e *adapters.Error
		if !errors.As(err, &e) || e.Type != "overloaded_error" || e.Message != "Overloaded" || e.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: error event gave %#v", dialect, err)
		}
		dec = providerOf(ant).NewStreamDecoder(req, bytes.NewReader(read(t, "testdata/stream/text.anthropic.sse")))
		if _, err := drain(dec); err != nil {
			t.Errorf("%s: complete stream gave %v", dialect, err)
		}
	}
}

func drain(dec adapters.StreamDecoder) ([]*adapters.StreamEvent, error) {
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

// Passthrough: the upstream gets the client's bytes with only the model
// changed, and the client gets the upstream's bytes, every frame of them,
// while the usage is still read for billing.
func TestPassthrough(t *testing.T) {
	body := read(t, "testdata/decode/tools.json")
	r := post("/v1/messages", "anthropic-version", "2023-06-01", "anthropic-beta", "prompt-caching-2024-07-31")
	req, err := ant.DecodeRequest(adapters.OpChat, body, r)
	if err != nil {
		t.Fatal(err)
	}
	// the channel's pinned version is for translated requests only
	p := adapters.Provider(&anthropic.Adapter{Version: "2099-01-01"})
	up := &adapters.Upstream{BaseURL: "https://api.anthropic.com/", Key: "sk-up", Model: "claude-opus-4-1-20250805"}
	hr, err := p.NewRequest(context.Background(), up, req)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(hr.Body)
	sameExceptModel(t, body, sent, "claude-opus-4-1-20250805")
	if hr.URL.String() != "https://api.anthropic.com/v1/messages" || hr.Header.Get("x-api-key") != "sk-up" ||
		hr.Header.Get("anthropic-version") != "2023-06-01" || hr.Header.Get("anthropic-beta") != "prompt-caching-2024-07-31" {
		t.Errorf("upstream request: %s %v", hr.URL, hr.Header)
	}

	// same model: the very same bytes
	up.Model = "claude-opus-4-1"
	hr, _ = p.NewRequest(context.Background(), up, req)
	if sent, _ := io.ReadAll(hr.Body); !bytes.Equal(sent, body) {
		t.Error("passthrough with the same model changed the body")
	}

	answer := read(t, "testdata/response/text.anthropic.json")
	resp, err := p.DecodeResponse(req, answer)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (adapters.Usage{PromptTokens: 312, CompletionTokens: 9, CachedTokens: 200, CacheWriteTokens: 100}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	if out, _ := ant.EncodeResponse(req, resp); !bytes.Equal(out, answer) {
		t.Error("passthrough answer changed")
	}

	for _, in := range []string{"testdata/stream/text.anthropic.sse", "testdata/stream/tools.anthropic.sse"} {
		stream := read(t, in)
		req.Stream = true
		dec := p.NewStreamDecoder(req, bytes.NewReader(stream))
		enc := ant.NewStreamEncoder(req)
		var out []byte
		var usage *adapters.Usage
		for {
			ev, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Usage != nil {
				usage = ev.Usage
			}
			out = enc.Encode(out, ev)
		}
		out = enc.Finish(out)
		if !bytes.Equal(out, stream) {
			t.Errorf("%s: passthrough stream changed:\n%s", in, out)
		}
		if usage == nil || usage.CompletionTokens == 0 || usage.PromptTokens == 0 {
			t.Errorf("%s: usage %+v", in, usage)
		}
	}
}

// Translated requests to an Anthropic channel carry the version and the
// max_tokens of the channel's adapter options.
func TestTranslatedRequestHeaders(t *testing.T) {
	req := decodeAny(t, "testdata/encode/basic.openai.json")
	up := &adapters.Upstream{BaseURL: "https://api.anthropic.com", Key: "k", Model: "claude-haiku-4-5"}
	hr, err := providerOf(ant).NewRequest(context.Background(), up, req)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Header.Get("anthropic-version") != anthropic.DefaultVersion || hr.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("headers %v", hr.Header)
	}
	pinned := &anthropic.Adapter{Version: "2024-01-01", MaxTokens: 777}
	hr, _ = pinned.NewRequest(context.Background(), up, req)
	sent, _ := io.ReadAll(hr.Body)
	if hr.Header.Get("anthropic-version") != "2024-01-01" || !bytes.Contains(sent, []byte(`"max_tokens":777`)) {
		t.Errorf("adapter options not used: %v %s", hr.Header, sent)
	}
	req.Op = adapters.OpCountTokens
	hr, _ = providerOf(ant).NewRequest(context.Background(), up, req)
	if hr.URL.Path != "/v1/messages/count_tokens" {
		t.Errorf("count_tokens path %s", hr.URL.Path)
	}
	req.Op = adapters.OpEmbedding
	if _, err := providerOf(ant).NewRequest(context.Background(), up, req); err == nil {
		t.Error("embedding request accepted")
	}
}

// sameExceptModel checks that every top-level member but the model kept its
// bytes.
func sameExceptModel(t *testing.T, in, out []byte, model string) {
	t.Helper()
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Errorf("members: %d in, %d out", len(a), len(b))
	}
	for k, v := range a {
		if k == "model" {
			if string(b[k]) != `"`+model+`"` {
				t.Errorf("model %s, want %s", b[k], model)
			}
			continue
		}
		if !bytes.Equal(v, b[k]) {
			t.Errorf("member %s changed:\n%s\n%s", k, v, b[k])
		}
	}
}
