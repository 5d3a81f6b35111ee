package openai_test

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
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// sent is the body and request NewRequest builds for a client request.
func sent(t *testing.T, up *adapters.Upstream, req *adapters.Request) (*http.Request, []byte) {
	t.Helper()
	hr, err := prov.NewRequest(context.Background(), up, req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	return hr, body
}

// members decodes a JSON object's top-level members, keeping their bytes.
func members(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return m
}

// sameExcept checks that every top-level member of in kept its bytes in
// out, but those in changed, which must hold the given JSON.
func sameExcept(t *testing.T, in, out []byte, changed map[string]string) {
	t.Helper()
	a, b := members(t, in), members(t, out)
	for k, v := range a {
		if _, ok := changed[k]; ok {
			continue
		}
		if !bytes.Equal(v, b[k]) {
			t.Errorf("member %s changed:\n%s\n%s", k, v, b[k])
		}
	}
	for k, want := range changed {
		if string(b[k]) != want {
			t.Errorf("member %s is %s, want %s", k, b[k], want)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			if _, ok := changed[k]; !ok {
				t.Errorf("member %s added", k)
			}
		}
	}
}

// Same dialect, non-streamed: the upstream gets the client's own bytes, or
// the same bytes with only the model replaced.
func TestPassthroughRequest(t *testing.T) {
	body := read(t, "testdata/decode/basic.json")
	req, err := oai.DecodeRequest(adapters.OpChat, body, post("/v1/chat/completions", "Authorization", "Bearer gw-key"))
	if err != nil {
		t.Fatal(err)
	}
	up := &adapters.Upstream{Channel: "oa", BaseURL: "https://api.openai.com/", Key: "sk-up", Model: "gpt-4o-mini"}
	hr, out := sent(t, up, req)
	if !bytes.Equal(out, body) {
		t.Errorf("same model: body changed:\n%s", out)
	}
	if hr.Method != http.MethodPost || hr.URL.String() != "https://api.openai.com/v1/chat/completions" {
		t.Errorf("upstream %s %s", hr.Method, hr.URL)
	}
	if hr.Header.Get("Authorization") != "Bearer sk-up" || hr.Header.Get("Content-Type") != "application/json" || hr.Header.Get("Accept") != "" {
		t.Errorf("upstream headers %v", hr.Header)
	}

	up.Model = "gpt-4o-mini-2024-07-18"
	_, out = sent(t, up, req)
	sameExcept(t, body, out, map[string]string{"model": `"gpt-4o-mini-2024-07-18"`})

	// a compact body comes back byte for byte but the model's value
	compact := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi \u00e9"}],"x_vendor":{"a":[1,2.50,"\u003c"]},"store":true}`)
	req, err = oai.DecodeRequest(adapters.OpChat, compact, post("/v1/chat/completions"))
	if err != nil {
		t.Fatal(err)
	}
	up.Model = "gpt-4.1"
	if _, out = sent(t, up, req); string(out) != strings.Replace(string(compact), `"gpt-4o"`, `"gpt-4.1"`, 1) {
		t.Errorf("mapped model:\n%s", out)
	}
}

// Same dialect, streamed: the gateway asks for usage when the client did
// not, and remembers that the client did not so its usage chunk is dropped.
func TestPassthroughStreamRequest(t *testing.T) {
	up := &adapters.Upstream{BaseURL: "https://api.openai.com", Key: "sk-up", Model: "gpt-4o"}
	tests := []struct {
		name, body   string
		includeUsage bool
		changed      map[string]string // nil: the very same bytes
	}{
		{"no stream_options", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}],"x":1}`, false,
			map[string]string{"stream_options": `{"include_usage":true}`}},
		{"include_usage false", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`, false,
			map[string]string{"stream_options": `{"include_usage":true}`}},
		{"include_usage true", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true, nil},
		{"not streamed", `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"hi"}]}`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := oai.DecodeRequest(adapters.OpChat, []byte(tt.body), post("/v1/chat/completions"))
			if err != nil {
				t.Fatal(err)
			}
			if req.IncludeUsage != tt.includeUsage {
				t.Errorf("IncludeUsage %v, want %v", req.IncludeUsage, tt.includeUsage)
			}
			hr, out := sent(t, up, req)
			if tt.changed == nil {
				if out := string(out); out != tt.body {
					t.Errorf("body changed:\n%s", out)
				}
			} else {
				sameExcept(t, []byte(tt.body), out, tt.changed)
			}
			if accept := hr.Header.Get("Accept"); (accept == "text/event-stream") != req.Stream {
				t.Errorf("Accept %q for stream %v", accept, req.Stream)
			}
		})
	}
	// legacy completions are streamed the same way
	req, err := oai.DecodeRequest(adapters.OpCompletion, []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"Say this","stream":true}`), post("/v1/completions"))
	if err != nil {
		t.Fatal(err)
	}
	up.Model = "gpt-3.5-turbo-instruct"
	hr, out := sent(t, up, req)
	if hr.URL.Path != "/v1/completions" || string(out) != `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this","stream":true,"stream_options":{"include_usage":true}}` {
		t.Errorf("completion: %s %s", hr.URL, out)
	}
}

// Embeddings: both paths reach {base}/v1/embeddings, with the model in the
// body where the client put it in the path.
func TestEmbeddingRequest(t *testing.T) {
	tests := []struct {
		path, body, upModel, want string
	}{
		{"/v1/embeddings", `{"model":"text-embedding-3-small","input":"hello","encoding_format":"float"}`, "text-embedding-3-small",
			`{"model":"text-embedding-3-small","input":"hello","encoding_format":"float"}`},
		{"/v1/embeddings", `{"model":"emb","input":["a","b"],"dimensions":256}`, "text-embedding-3-large",
			`{"model":"text-embedding-3-large","input":["a","b"],"dimensions":256}`},
		{"/v1/engines/text-embedding-ada-002/embeddings", `{"input":"hello"}`, "text-embedding-ada-002",
			`{"input":"hello","model":"text-embedding-ada-002"}`},
		{"/v1/engines/ada/embeddings", `{"input":[[1,2,3]]}`, "text-embedding-ada-002",
			`{"input":[[1,2,3]],"model":"text-embedding-ada-002"}`},
	}
	for _, tt := range tests {
		req, err := oai.DecodeRequest(adapters.OpEmbedding, []byte(tt.body), post(tt.path))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.path, tt.body, err)
		}
		up := &adapters.Upstream{BaseURL: "https://example.openai.azure.com/openai", Key: "k", Model: tt.upModel}
		hr, out := sent(t, up, req)
		if hr.URL.String() != "https://example.openai.azure.com/openai/v1/embeddings" || string(out) != tt.want {
			t.Errorf("%s %s: sent %s %s, want %s", tt.path, tt.body, hr.URL, out, tt.want)
		}
	}
}

// What cannot be sent is refused with a 400 before anything goes out.
func TestNewRequestRefusals(t *testing.T) {
	up := &adapters.Upstream{Channel: "oa", BaseURL: "https://api.openai.com", Model: "m"}
	for _, op := range []adapters.Operation{adapters.OpImage, adapters.OpSpeech, adapters.OpCountTokens} {
		_, err := prov.NewRequest(context.Background(), up, &adapters.Request{Op: op, Dialect: openai.Name, Raw: []byte(`{}`)})
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, `"oa"`) {
			t.Errorf("%s: %v", op, err)
		}
	}
	// another dialect's embeddings are not translated
	req := &adapters.Request{Op: adapters.OpEmbedding, Dialect: "translated", Model: "m", Embedding: &adapters.EmbeddingRequest{Input: []string{"a"}}}
	if _, err := prov.NewRequest(context.Background(), up, req); err == nil {
		t.Error("translated embedding accepted")
	}
	// no key: no Authorization header (a local server)
	req, _ = oai.DecodeRequest(adapters.OpChat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), post("/v1/chat/completions"))
	hr, _ := sent(t, up, req)
	if _, ok := hr.Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %v", hr.Header)
	}
}

// A same-dialect answer goes back as the upstream wrote it; its usage is
// read for billing, and without usage its text is kept for counting.
func TestPassthroughResponse(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Dialect: openai.Name, Model: "gpt-4o"}
	answer := read(t, "testdata/response/text.openai.json")
	resp, err := prov.DecodeResponse(req, answer)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Dialect != openai.Name || !bytes.Equal(resp.Raw, answer) || resp.ContentType != "application/json" {
		t.Errorf("passthrough answer: %+v", resp)
	}
	if resp.Usage != (adapters.Usage{PromptTokens: 1219, CompletionTokens: 10, CachedTokens: 1024}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	if out, err := oai.EncodeResponse(req, resp); err != nil || !bytes.Equal(out, answer) {
		t.Errorf("passthrough answer changed (%v)", err)
	}

	noUsage := []byte(`{"id":"chatcmpl-X","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"finish_reason":"stop"}]}`)
	resp, err = prov.DecodeResponse(req, noUsage)
	if err != nil || resp.Usage.Known() || len(resp.Message.Parts) != 1 || resp.Message.Parts[0].Text != "Hi there" {
		t.Errorf("answer without usage: %v %+v", err, resp)
	}
	req.Op = adapters.OpCompletion
	resp, err = prov.DecodeResponse(req, []byte(`{"id":"cmpl-X","object":"text_completion","choices":[{"text":"This is","index":0},{"text":" a test","index":1}]}`))
	if err != nil || len(resp.Message.Parts) != 2 || resp.Message.Parts[0].Text+resp.Message.Parts[1].Text != "This is a test" {
		t.Errorf("completion without usage: %v %+v", err, resp)
	}
	req.Op = adapters.OpEmbedding
	resp, err = prov.DecodeResponse(req, []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"e","usage":{"prompt_tokens":8,"total_tokens":8}}`))
	if err != nil || resp.Usage.PromptTokens != 8 || resp.Usage.CompletionTokens != 0 {
		t.Errorf("embedding usage: %v %+v", err, resp)
	}
	if _, err := prov.DecodeResponse(req, []byte(`<html>`)); err == nil {
		t.Error("invalid JSON accepted")
	}
	// translated: only chat answers
	if _, err := prov.DecodeResponse(&adapters.Request{Op: adapters.OpEmbedding, Dialect: "translated"}, []byte(`{}`)); err == nil {
		t.Error("translated embedding answer accepted")
	}
	if _, err := oai.EncodeResponse(&adapters.Request{Op: adapters.OpEmbedding}, &adapters.Response{}); err == nil {
		t.Error("embedding answer from another family encoded")
	}
}

// A same-dialect stream: every frame goes back as it came, the usage chunk
// is read for billing and shown only to a client that asked for it.
func TestPassthroughStream(t *testing.T) {
	done := []byte("data: [DONE]\n\n")
	for _, in := range []string{"testdata/stream/text.openai.sse", "testdata/stream/tools.openai.sse", "testdata/stream/usage.openai.sse"} {
		t.Run(base(in), func(t *testing.T) {
			stream := read(t, in)
			for _, includeUsage := range []bool{true, false} {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: openai.Name, Model: "gpt-4o", Stream: true, IncludeUsage: includeUsage}
				evs, err := drain(adapters.DecodeStream(prov, req, bytes.NewReader(stream)))
				if err != nil {
					t.Fatal(err)
				}
				var raw, want []byte
				var usage *adapters.Usage
				enc := oai.NewStreamEncoder(req)
				var out []byte
				for _, ev := range evs {
					if ev.Dialect != openai.Name || ev.Raw == nil {
						t.Fatalf("event without the upstream's frame: %+v", ev)
					}
					raw = append(raw, ev.Raw...)
					switch ev.Type {
					case adapters.EventUsage:
						usage = ev.Usage
						if includeUsage {
							want = append(want, ev.Raw...)
						}
					case adapters.EventPassthrough:
						want = append(want, ev.Raw...)
					default:
						t.Errorf("passthrough event of type %s", ev.Type)
					}
					out = enc.Encode(out, ev)
				}
				if !bytes.Equal(append(raw, done...), stream) {
					t.Errorf("frames differ from the upstream's:\n%s", raw)
				}
				if out = enc.Finish(out); !bytes.Equal(out, append(want, done...)) {
					t.Errorf("include_usage %v: client got\n%s", includeUsage, out)
				}
				if includeUsage && !bytes.Equal(out, stream) {
					t.Error("a client that asked for usage did not get the upstream's stream unchanged")
				}
				if usage == nil || usage.PromptTokens == 0 || usage.CompletionTokens == 0 {
					t.Errorf("usage %+v", usage)
				}
			}
		})
	}
	// the numbers, details included
	req := &adapters.Request{Op: adapters.OpChat, Dialect: openai.Name, Stream: true}
	evs, _ := drain(adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/usage.openai.sse"))))
	if u := evs[len(evs)-1].Usage; u == nil || *u != (adapters.Usage{PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, ReasoningTokens: 256}) {
		t.Errorf("usage %+v", u)
	}
}

// A stream without usage can still be counted from its text.
func TestPartialText(t *testing.T) {
	req := &adapters.Request{Op: adapters.OpChat, Dialect: openai.Name, Stream: true}
	tests := []struct {
		in, want string
		end      error
	}{
		{"testdata/stream/truncated.openai.sse", "Once upon a time", io.ErrUnexpectedEOF},
		{"testdata/stream/cut_midframe.openai.sse", "Hello", nil},
		// usage came: nothing to count
		{"testdata/stream/text.openai.sse", "", nil},
	}
	for _, tt := range tests {
		dec := adapters.DecodeStream(prov, req, bytes.NewReader(read(t, tt.in)))
		_, err := drain(dec)
		if tt.end != nil && !errors.Is(err, tt.end) {
			t.Errorf("%s: ended with %v, want %v", tt.in, err, tt.end)
		}
		if got := dec.PartialText(); got != tt.want {
			t.Errorf("%s: partial text %q, want %q", tt.in, got, tt.want)
		}
	}
	// reasoning and tool calls count too; the usage chunk removed
	var stream []byte
	for _, f := range [][]byte{read(t, "testdata/stream/usage.openai.sse"), read(t, "testdata/stream/tools.openai.sse")} {
		for _, frame := range bytes.SplitAfter(f, []byte("\n\n")) {
			if !bytes.Contains(frame, []byte(`"usage":{`)) && !bytes.Contains(frame, []byte("[DONE]")) {
				stream = append(stream, frame...)
			}
		}
	}
	dec := adapters.DecodeStream(prov, req, bytes.NewReader(append(stream, "data: [DONE]\n\n"...)))
	if _, err := drain(dec); err != nil {
		t.Fatal(err)
	}
	want := `Prime check: 97 has no divisor below 10.Yes, 97 is prime.get_weather{"city": "Paris"}get_weather{"city": "Rome"}`
	if got := dec.PartialText(); got != want {
		t.Errorf("partial text %q, want %q", got, want)
	}
}

// The stream decoder tells a normal end from a cut-off stream and an
// upstream error, in both modes.
func TestStreamEnds(t *testing.T) {
	for _, dialect := range []string{openai.Name, "translated"} {
		req := &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}
		dec := adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/truncated.openai.sse")))
		if _, err := drain(dec); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: truncated stream gave %v, want io.ErrUnexpectedEOF", dialect, err)
		}
		dec = adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/error.openai.sse")))
		evs, err := drain(dec)
		var e *adapters.Error
		if !errors.As(err, &e) || e.Type != "server_error" || e.Status != http.StatusBadGateway || !strings.HasPrefix(e.Message, "The server had an error") {
			t.Errorf("%s: error event gave %#v", dialect, err)
		}
		if len(evs) == 0 {
			t.Errorf("%s: no events before the error", dialect)
		}
		dec = adapters.DecodeStream(prov, req, bytes.NewReader(read(t, "testdata/stream/text.openai.sse")))
		if _, err := drain(dec); err != nil {
			t.Errorf("%s: complete stream gave %v", dialect, err)
		}
		if _, err := dec.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: Next after the end gave %v", dialect, err)
		}
	}
}
