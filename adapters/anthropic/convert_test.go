package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
)

// The stream decoder reports a cut-off stream and an upstream error, not a
// normal end.
func TestStreamEnds(t *testing.T) {
	for _, dialect := range []string{anthropic.Name, "translated"} {
		req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}
		dec := adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/truncated.anthropic.sse")))
		if _, err := drain(dec); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: truncated stream gave %v, want io.ErrUnexpectedEOF", dialect, err)
		}
		if dialect == "anthropic" && dec.PartialText() != "Par" {
			t.Errorf("%s: partial text of a cut-off passthrough stream", dialect)
		}
		dec = adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/error.anthropic.sse")))
		_, err := drain(dec)
		var e *adapters.Error
		if !errors.As(err, &e) || e.Type != "overloaded_error" || e.Message != "Overloaded" || e.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: error event gave %#v", dialect, err)
		}
		dec = adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/text.anthropic.sse")))
		if _, err := drain(dec); err != nil {
			t.Errorf("%s: complete stream gave %v", dialect, err)
		}
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
	p := adapters.ChatProvider(&anthropic.Adapter{Version: "2099-01-01"})
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
		dec := adapters.DecodeStream(p, req, bytes.NewReader(stream))
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

// translatedChat is a chat request as another dialect decodes it.
func translatedChat() *adapters.Request {
	return &adapters.Request{Op: adapters.OpChat, Dialect: "translated", Model: "client-model", Stream: true, Chat: &adapters.ChatRequest{
		Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "hi"}}}},
	}}
}

// Translated requests to an Anthropic channel carry the version and the
// max_tokens of the channel's adapter options.
func TestTranslatedRequestHeaders(t *testing.T) {
	req := translatedChat()
	up := &adapters.Upstream{BaseURL: "https://api.anthropic.com", Key: "k", Model: "claude-haiku-4-5"}
	hr, err := prov.NewRequest(context.Background(), up, req)
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
	hr, _ = prov.NewRequest(context.Background(), up, req)
	if hr.URL.Path != "/v1/messages/count_tokens" {
		t.Errorf("count_tokens path %s", hr.URL.Path)
	}
	req.Op = adapters.OpEmbedding
	if _, err := prov.NewRequest(context.Background(), up, req); err == nil {
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
