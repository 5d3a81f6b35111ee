package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

// tinyPNG is what the stub fetcher answers for any image URL.
var tinyPNG = []byte("\x89PNG\r\n\x1a\nfake")

func stubFetch(t *testing.T) {
	t.Cleanup(gemini.SetFetchImage(func(_ context.Context, u string) (*adapters.Image, error) {
		if strings.Contains(u, "private") {
			return nil, adapters.BadRequest("image URL %q was not fetched: it points to a non-public address", u)
		}
		return &adapters.Image{MediaType: "image/png", Data: tinyPNG}, nil
	}))
}

// A stream that ends before a finish reason was cut off; an error chunk is
// an *adapters.Error; EOF after a finish reason is the normal end.
func TestStreamEnds(t *testing.T) {
	for _, dialect := range []string{gemini.Name, "translated"} {
		req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}
		p := prov
		dec := adapters.DecodeStream(p, req, bytes.NewReader(read(t, "testdata/stream/truncated.gemini.sse")))
		if _, err := drain(dec); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: truncated stream gave %v", dialect, err)
		}
		if dialect == "gemini" && dec.PartialText() != "Par" {
			t.Errorf("%s: partial text of a cut-off passthrough stream", dialect)
		}
		_, err := drain(adapters.DecodeStream(p, req, bytes.NewReader(read(t, "testdata/stream/error.gemini.sse"))))
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != 503 || e.Type != "overloaded_error" || !strings.Contains(e.Message, "overloaded") {
			t.Errorf("%s: error chunk gave %#v", dialect, err)
		}
		for _, in := range []string{"text", "tools", "maxtokens"} {
			if _, err := drain(adapters.DecodeStream(p, req, bytes.NewReader(read(t, "testdata/stream/"+in+".gemini.sse")))); err != nil {
				t.Errorf("%s %s: %v", dialect, in, err)
			}
		}
		if _, err := drain(adapters.DecodeStream(p, req, strings.NewReader(""))); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: empty body gave %v", dialect, err)
		}
	}
}

// Passthrough: the client's body goes up as it is (the model is in the
// URL), and every chunk comes back as it was, with the usage read.
func TestPassthrough(t *testing.T) {
	body := read(t, "testdata/decode/tools.json")
	r := post("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=sk-gw")
	req, err := gem.DecodeRequest(adapters.OpChat, body, r)
	if err != nil {
		t.Fatal(err)
	}
	if !req.Stream || req.Model != "gemini-2.5-flash" {
		t.Fatalf("stream %v model %q", req.Stream, req.Model)
	}
	p := prov
	up := &adapters.Upstream{BaseURL: "https://generativelanguage.googleapis.com/", Key: "AIza-up", Model: "models/gemini-2.5-pro"}
	hr, err := p.NewRequest(context.Background(), up, req)
	if err != nil {
		t.Fatal(err)
	}
	if sent, _ := io.ReadAll(hr.Body); !bytes.Equal(sent, body) {
		t.Error("passthrough body changed")
	}
	if hr.URL.String() != "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse" ||
		hr.Header.Get("x-goog-api-key") != "AIza-up" || hr.URL.Query().Get("key") != "" {
		t.Errorf("upstream request %s %v", hr.URL, hr.Header)
	}

	req.Stream = false
	answer := read(t, "testdata/response/tools.gemini.json")
	resp, err := p.DecodeResponse(req, answer)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (adapters.Usage{PromptTokens: 320, CompletionTokens: 80, CachedTokens: 256, ReasoningTokens: 50}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	if out, _ := gem.EncodeResponse(req, resp); !bytes.Equal(out, answer) {
		t.Error("passthrough answer changed")
	}

	req.Stream = true
	for _, in := range []string{"text", "tools", "maxtokens"} {
		stream := read(t, "testdata/stream/"+in+".gemini.sse")
		dec := adapters.DecodeStream(p, req, bytes.NewReader(stream))
		enc := gem.NewStreamEncoder(req)
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
			t.Errorf("%s: passthrough stream changed:\n%q", in, out)
		}
		if usage == nil || usage.CompletionTokens == 0 {
			t.Errorf("%s: usage %+v", in, usage)
		}
	}

	// countTokens with another model renames the inner request's model
	count := []byte(`{"generateContentRequest":{"model":"models/gemini-2.5-flash","contents":[{"parts":[{"text":"hi"}]}]}}`)
	creq, err := gem.DecodeRequest(adapters.OpCountTokens, count, post("/v1/models/gemini-2.5-flash:countTokens"))
	if err != nil {
		t.Fatal(err)
	}
	hr, err = p.NewRequest(context.Background(), up, creq)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(hr.Body)
	if hr.URL.Path != "/v1beta/models/gemini-2.5-pro:countTokens" || string(sent) != `{"generateContentRequest":{"model":"models/gemini-2.5-pro","contents":[{"parts":[{"text":"hi"}]}]}}` {
		t.Errorf("count %s %s", hr.URL, sent)
	}
	cresp, err := p.DecodeResponse(creq, []byte(`{"totalTokens":3}`))
	if err != nil || cresp.Raw == nil || cresp.Usage.Known() {
		t.Errorf("count answer %+v %v", cresp, err)
	}
}

// The signature a Gemini client gets for another vendor's thinking comes
// back recognised (the Anthropic family's tests check that it reaches
// Anthropic bare), and a Gemini signature that went through an Anthropic
// client is sent back to Gemini.
func TestSignatureRoundTrip(t *testing.T) {
	resp := &adapters.Response{Message: adapters.Message{Role: adapters.RoleAssistant, Parts: []adapters.Part{
		{Type: adapters.PartThinking, Text: "hmm", Signature: "anthropic:EqQB"},
		{Type: adapters.PartText, Text: "ok"},
	}}}
	out, err := gem.EncodeResponse(&adapters.Request{Op: adapters.OpChat}, resp)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Candidates []struct {
			Content json.RawMessage `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	body := `{"contents":[{"role":"user","parts":[{"text":"q"}]},` + string(w.Candidates[0].Content) + `,{"role":"user","parts":[{"text":"more"}]}]}`
	req, err := gem.DecodeRequest(adapters.OpChat, []byte(body), post("/v1beta/models/claude:generateContent"))
	if err != nil {
		t.Fatal(err)
	}
	if sig := req.Chat.Messages[1].Parts[0].Signature; sig != "anthropic:EqQB" {
		t.Fatalf("signature came back as %q", sig)
	}
	// the conformance kit checks this golden byte for byte; this says why
	gb := read(t, "testdata/encode/thinking.anthropic.gemini.golden")
	if !bytes.Contains(gb, []byte(`"thoughtSignature": "Q2lRQmpaRTlnRXhhbXBsZQ=="`)) || bytes.Contains(gb, []byte("Claude's own")) {
		t.Errorf("gemini request %s", gb)
	}
}

// A count answer, shown to a Gemini client whichever family counted.
func TestCountTokensAnswer(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpCountTokens, Dialect: gemini.Name, Model: "claude-x"}
	out, err := gem.EncodeResponse(req, &adapters.Response{Usage: adapters.Usage{PromptTokens: 17}})
	if err != nil || string(out) != `{"totalTokens":17}` {
		t.Errorf("%s %v", out, err)
	}
}
