// Package demo is a local model for trying the gateway without any vendor
// key: model "demo" answers by echoing the last user message, streamed word
// by word, with token counts from the offline tokenizer. It speaks OpenAI's
// wire format through an in-process transport, so every client dialect
// reaches it through the same translation code as a real upstream.
// It registers the Caddy module gateway.adapters.demo (channel type "demo").
package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

func init() {
	caddy.RegisterModule(Adapter{})
}

// DefaultWordDelay paces the streamed words so a person sees them arrive.
const DefaultWordDelay = 15 * time.Millisecond

// Adapter is the demo provider: OpenAI's request and answer handling, with
// an in-process model instead of a network. It is a provider only, not a
// client dialect.
type Adapter struct {
	// WordDelay is the pause before each streamed word. Default 15ms;
	// "0s" is not allowed, use 1ns for as fast as possible.
	WordDelay caddy.Duration `json:"word_delay,omitempty"`

	wire openai.Adapter
}

// Provision fills the defaults.
func (a *Adapter) Provision(caddy.Context) error {
	if a.WordDelay < 0 {
		return fmt.Errorf("demo adapter: word_delay must not be negative")
	}
	if a.WordDelay == 0 {
		a.WordDelay = caddy.Duration(DefaultWordDelay)
	}
	return nil
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type demo {
//		word_delay <duration>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		if opt != "word_delay" {
			return d.Errf("unrecognized demo adapter option %q (it takes word_delay)", opt)
		}
		t, err := caddy.ParseDuration(v)
		if err != nil || t <= 0 {
			return d.Errf("word_delay must be a positive duration such as 15ms, not %q", v)
		}
		a.WordDelay = caddy.Duration(t)
		return nil
	})
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.demo",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return "demo" }

// WireDialect implements adapters.ChatProvider: the demo model speaks OpenAI's
// wire format, so OpenAI clients reach it by passthrough.
func (a Adapter) WireDialect() string { return a.wire.WireDialect() }

// NewRequest implements adapters.ChatProvider.
func (a Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	return a.wire.NewRequest(ctx, up, req)
}

// DecodeResponse implements adapters.ChatProvider.
func (a Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	return a.wire.DecodeResponse(req, body)
}

// NewStreamStep implements adapters.ChatProvider.
func (a Adapter) NewStreamStep(req *adapters.Request) adapters.StreamStep {
	return a.wire.NewStreamStep(req)
}

// DecodeError implements adapters.Provider.
func (a Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return a.wire.DecodeError(status, body)
}

// Transport implements adapters.Transporter.
func (a Adapter) Transport() http.RoundTripper {
	return model{wordDelay: time.Duration(cmp.Or(a.WordDelay, caddy.Duration(DefaultWordDelay)))}
}

// model answers OpenAI-shaped requests in process.
type model struct {
	wordDelay time.Duration
}

func (m model) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/responses"):
		return m.responses(r, body)
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		return m.chat(r, body)
	case strings.HasSuffix(r.URL.Path, "/completions"):
		return completion(r, body)
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		return embeddings(body)
	}
	return answer(http.StatusNotFound, `{"error":{"message":"the demo model does not serve this endpoint","type":"invalid_request_error"}}`), nil
}

func answer(status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
	}
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text string
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m model) chat(r *http.Request, body []byte) (*http.Response, error) {
	var req struct {
		Model         string    `json:"model"`
		Messages      []message `json:"messages"`
		Stream        bool      `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return answer(http.StatusBadRequest, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`), nil
	}
	reply := ""
	var texts []string
	for _, m := range req.Messages {
		t := m.text()
		texts = append(texts, t)
		if m.Role == "user" {
			reply = t
		}
	}
	if reply == "" {
		reply = "(the demo model echoes your last message, and there was none)"
	}
	prompt := tokenizer.CountChat(req.Model, texts)
	completionTokens := tokenizer.Count(req.Model, reply)
	id := "chatcmpl-demo" + strconv.FormatInt(time.Now().UnixNano(), 36)
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens}
	if !req.Stream {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": reply}, "finish_reason": "stop", "logprobs": nil}},
			"usage":   usage,
		})
		return answer(http.StatusOK, string(b)), nil
	}
	pr, pw := io.Pipe()
	go func() {
		chunk := func(delta map[string]any, finish any) []byte {
			b, _ := json.Marshal(map[string]any{
				"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
			})
			return adapters.AppendSSE(nil, "", b)
		}
		write := func(b []byte) bool {
			_, err := pw.Write(b)
			return err == nil
		}
		if !write(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
			return
		}
		for _, w := range splitWords(reply) {
			select {
			case <-r.Context().Done():
				pw.CloseWithError(r.Context().Err())
				return
			case <-time.After(m.wordDelay):
			}
			if !write(chunk(map[string]any{"content": w}, nil)) {
				return
			}
		}
		write(chunk(map[string]any{}, "stop"))
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}, "usage": usage})
			write(adapters.AppendSSE(nil, "", b))
		}
		write([]byte("data: [DONE]\n\n"))
		pw.Close()
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, ContentLength: -1,
	}, nil
}

// responses answers the Responses API in its own wire format, written by
// the same encoder that answers Responses clients of translated channels.
func (m model) responses(r *http.Request, body []byte) (*http.Response, error) {
	req, err := openai.Adapter{}.DecodeRequest(adapters.OpResponses, body, nil)
	if err != nil {
		return answer(http.StatusBadRequest, string(openai.Adapter{}.EncodeError(asError(err)))), nil
	}
	reply := ""
	var texts []string
	for _, p := range req.Chat.System {
		texts = append(texts, p.Text)
	}
	for _, msg := range req.Chat.Messages {
		var b strings.Builder
		for _, p := range msg.Parts {
			b.WriteString(p.Text)
			if p.ToolResult != nil {
				for _, rp := range p.ToolResult.Content {
					b.WriteString(rp.Text)
				}
			}
		}
		texts = append(texts, b.String())
		if msg.Role == adapters.RoleUser {
			reply = b.String()
		}
	}
	if reply == "" {
		reply = "(the demo model echoes your last message, and there was none)"
	}
	prompt := tokenizer.CountChat(req.Model, texts)
	usage := adapters.Usage{PromptTokens: prompt, CompletionTokens: tokenizer.Count(req.Model, reply)}
	id := "demo" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if !req.Stream {
		out, err := openai.EncodeResponsesAnswer(req, &adapters.Response{ID: id, Model: req.Model, StopReason: adapters.StopEnd, Usage: usage,
			Message: adapters.Message{Role: adapters.RoleAssistant, Parts: []adapters.Part{{Type: adapters.PartText, Text: reply}}}})
		if err != nil {
			return nil, err
		}
		return answer(http.StatusOK, string(out)), nil
	}
	pr, pw := io.Pipe()
	go func() {
		enc := openai.NewResponsesStreamEncoder(req)
		write := func(b []byte) bool {
			_, err := pw.Write(b)
			return err == nil
		}
		if !write(enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventStart, ID: id, Model: req.Model})) {
			return
		}
		for _, w := range splitWords(reply) {
			select {
			case <-r.Context().Done():
				pw.CloseWithError(r.Context().Err())
				return
			case <-time.After(m.wordDelay):
			}
			if !write(enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventTextDelta, Text: w})) {
				return
			}
		}
		enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventFinish, StopReason: adapters.StopEnd})
		enc.Encode(nil, &adapters.StreamEvent{Type: adapters.EventUsage, Usage: &usage})
		write(enc.Finish(nil))
		pw.Close()
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, ContentLength: -1,
	}, nil
}

func asError(err error) *adapters.Error {
	if e, ok := err.(*adapters.Error); ok {
		return e
	}
	return adapters.BadRequest("%v", err)
}

// splitWords keeps each word's following space, so the pieces join back
// into the exact reply.
func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func completion(r *http.Request, body []byte) (*http.Response, error) {
	var req struct {
		Model  string          `json:"model"`
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return answer(http.StatusBadRequest, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`), nil
	}
	var prompt string
	if json.Unmarshal(req.Prompt, &prompt) != nil {
		var list []string
		_ = json.Unmarshal(req.Prompt, &list)
		prompt = strings.Join(list, "\n")
	}
	p, c := tokenizer.Count(req.Model, prompt), tokenizer.Count(req.Model, prompt)
	b, _ := json.Marshal(map[string]any{
		"id": "cmpl-demo", "object": "text_completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "text": prompt, "finish_reason": "stop", "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
	})
	return answer(http.StatusOK, string(b)), nil
}

// embeddings returns a deterministic unit vector per input, derived from
// its hash, so equal texts get equal vectors.
func embeddings(body []byte) (*http.Response, error) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return answer(http.StatusBadRequest, `{"error":{"message":"invalid JSON","type":"invalid_request_error"}}`), nil
	}
	var inputs []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		inputs = []string{one}
	} else {
		_ = json.Unmarshal(req.Input, &inputs)
	}
	dims := req.Dimensions
	if dims <= 0 {
		dims = 16
	}
	var data []any
	var tokens int64
	for i, in := range inputs {
		tokens += tokenizer.Count(req.Model, in)
		v := vector(in, dims)
		var emb any = v
		if req.EncodingFormat == "base64" {
			var buf bytes.Buffer
			_ = binary.Write(&buf, binary.LittleEndian, v)
			emb = base64.StdEncoding.EncodeToString(buf.Bytes())
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
	return answer(http.StatusOK, string(b)), nil
}

func vector(s string, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		h := sha256.Sum256([]byte(fmt.Sprintf("%d:%s", i, s)))
		x := float64(binary.LittleEndian.Uint32(h[:4]))/math.MaxUint32*2 - 1
		v[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

// Interface guards.
var (
	_ caddy.Module          = (*Adapter)(nil)
	_ adapters.Provider     = (*Adapter)(nil)
	_ adapters.ChatProvider = (*Adapter)(nil)
	_ adapters.Transporter  = (*Adapter)(nil)
	_ caddy.Provisioner     = (*Adapter)(nil)
	_ caddyfile.Unmarshaler = (*Adapter)(nil)
)
