package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

func decodeChat(t *testing.T, path string) *adapters.Request {
	t.Helper()
	req, err := oai.DecodeRequest(adapters.OpChat, read(t, path), post("/v1/chat/completions"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return req
}

// A translated chat request goes out as EncodeChatRequest makes it (the
// conformance kit checks those bytes against decode/*.to-openai.golden).
func TestNewRequestIsEncodeChatRequest(t *testing.T) {
	for _, in := range inputs(t, "testdata/decode/*.json") {
		t.Run(base(in), func(t *testing.T) {
			req := decodeChat(t, in)
			req.Dialect = "translated"
			up := &adapters.Upstream{Channel: "oa", BaseURL: "https://api.openai.com", Key: "sk-up", Model: "gpt-upstream"}
			hr, err := prov.NewRequest(context.Background(), up, req)
			direct, derr := openai.EncodeChatRequest(req, up.Model)
			if err != nil || derr != nil {
				if err == nil || derr == nil || err.Error() != derr.Error() {
					t.Fatalf("NewRequest refused with %v, EncodeChatRequest with %v", err, derr)
				}
				return
			}
			body, err := io.ReadAll(hr.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(direct, body) {
				t.Errorf("NewRequest sent other bytes than EncodeChatRequest makes:\n%s\n%s", body, direct)
			}
		})
	}
}

// Neutral requests as the other dialects decode them → the OpenAI body.
func TestEncodeChatRequestGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/neutral/request/*.json") {
		t.Run(base(in), func(t *testing.T) {
			var req adapters.Request
			if err := json.Unmarshal(read(t, in), &req); err != nil {
				t.Fatal(err)
			}
			golden(t, stem(in)+".golden", upstreamBody(t, &req))
		})
	}
}

// upstreamBody is the body NewRequest sends for a translated request, or the
// error it refused with, as a comment line.
func upstreamBody(t *testing.T, req *adapters.Request) []byte {
	t.Helper()
	up := &adapters.Upstream{Channel: "oa", BaseURL: "https://api.openai.com", Key: "sk-up", Model: "gpt-upstream"}
	hr, err := prov.NewRequest(context.Background(), up, req)
	if err != nil {
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != 400 {
			t.Fatalf("refusal is not a 400 *adapters.Error: %#v", err)
		}
		return []byte("# error: " + e.Message + "\n")
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := openai.EncodeChatRequest(req, up.Model)
	if err != nil || !bytes.Equal(direct, body) {
		t.Errorf("NewRequest sent other bytes than EncodeChatRequest makes (%v)", err)
	}
	return body
}

// Neutral answers from other providers → the chat.completion an OpenAI
// client reads.
func TestEncodeResponseGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/neutral/response/*.json") {
		t.Run(base(in), func(t *testing.T) {
			var resp adapters.Response
			if err := json.Unmarshal(read(t, in), &resp); err != nil {
				t.Fatal(err)
			}
			req := &adapters.Request{Op: adapters.OpChat, Dialect: openai.Name, Model: "client-model"}
			out, err := oai.EncodeResponse(req, &resp)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, stem(in)+".golden", stable(out))
		})
	}
}

// streamCase is a neutral event sequence as another provider's decoder
// yields it, and the client request it answers.
type streamCase struct {
	Request adapters.Request
	Events  []adapters.StreamEvent
	Error   *adapters.Error // ends the stream with an in-stream error instead of Finish
}

func encodeStream(t *testing.T, path string) []byte {
	t.Helper()
	var c streamCase
	if err := json.Unmarshal(read(t, path), &c); err != nil {
		t.Fatal(err)
	}
	enc := oai.NewStreamEncoder(&c.Request)
	if ct := enc.ContentType(); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	var out []byte
	for i := range c.Events {
		out = enc.Encode(out, &c.Events[i])
	}
	if c.Error != nil {
		return enc.Error(out, c.Error)
	}
	return enc.Finish(out)
}

// Neutral events → the chunks an OpenAI client reads.
func TestStreamEncodeGolden(t *testing.T) {
	for _, in := range inputs(t, "testdata/neutral/events/*.json") {
		t.Run(base(in), func(t *testing.T) {
			golden(t, stem(in)+".golden", stable(encodeStream(t, in)))
		})
	}
}

// chunkOf is the part of a chunk the shape checks read.
type chunkOf struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				Index *int   `json:"index"`
				ID    string `json:"id"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// frames splits an encoder's output into its data payloads, checking that
// every frame is a lone data: line and its blank line.
func frames(t *testing.T, out []byte) [][]byte {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	var data [][]byte
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		if !strings.HasPrefix(f, "data: ") || strings.Contains(f, "\n") {
			t.Fatalf("frame is not one data line: %q", f)
		}
		data = append(data, []byte(strings.TrimPrefix(f, "data: ")))
	}
	return data
}

// What OpenAI's SDKs rely on in a stream: the first chunk carries the
// assistant role, tool calls are numbered 0, 1, ... per call whatever the
// neutral block index, usage comes only when the client asked, and the
// stream ends with [DONE] or an error object.
func TestStreamEncoderShape(t *testing.T) {
	for _, in := range inputs(t, "testdata/neutral/events/*.json") {
		t.Run(base(in), func(t *testing.T) {
			var c streamCase
			if err := json.Unmarshal(read(t, in), &c); err != nil {
				t.Fatal(err)
			}
			data := frames(t, encodeStream(t, in))
			last := data[len(data)-1]
			if c.Error == nil {
				if string(last) != "[DONE]" {
					t.Errorf("last frame %s, want [DONE]", last)
				}
				data = data[:len(data)-1]
			} else {
				var e chunkOf
				if err := json.Unmarshal(last, &e); err != nil || e.Error == nil || e.Error.Message != c.Error.Message || e.Error.Type != string(c.Error.Type) {
					t.Errorf("last frame %s, want the error", last)
				}
				data = data[:len(data)-1]
			}
			var chunks []chunkOf
			for _, d := range data {
				var ch chunkOf
				if err := json.Unmarshal(d, &ch); err != nil {
					t.Fatalf("chunk %s: %v", d, err)
				}
				if ch.Object != "chat.completion.chunk" || ch.ID == "" || ch.Model == "" {
					t.Errorf("chunk header %s", d)
				}
				if ch.ID != chunks0ID(chunks, ch.ID) {
					t.Errorf("chunk id changed mid-stream: %s", d)
				}
				chunks = append(chunks, ch)
			}
			if len(chunks) == 0 || len(chunks[0].Choices) != 1 || chunks[0].Choices[0].Delta.Role != "assistant" {
				t.Fatalf("first chunk does not carry the assistant role: %s", data[0])
			}
			var toolIdx []int
			var usageChunks int
			for i, ch := range chunks {
				if ch.Usage != nil {
					usageChunks++
					if len(ch.Choices) != 0 || ch.Usage.TotalTokens != ch.Usage.PromptTokens+ch.Usage.CompletionTokens {
						t.Errorf("usage chunk %s", data[i])
					}
				}
				for _, chc := range ch.Choices {
					for _, tc := range chc.Delta.ToolCalls {
						if tc.Index == nil {
							t.Fatalf("tool call without an index: %s", data[i])
						}
						if tc.ID != "" {
							if *tc.Index != len(toolIdx) {
								t.Errorf("tool call %s has index %d, want %d", tc.ID, *tc.Index, len(toolIdx))
							}
							toolIdx = append(toolIdx, *tc.Index)
						} else if *tc.Index >= len(toolIdx) {
							t.Errorf("arguments for tool call %d before its start", *tc.Index)
						}
					}
				}
			}
			wantUsage := 0
			for _, ev := range c.Events {
				if ev.Type == adapters.EventUsage && c.Request.IncludeUsage {
					wantUsage++
				}
			}
			if usageChunks != wantUsage {
				t.Errorf("%d usage chunks, want %d (include_usage %v)", usageChunks, wantUsage, c.Request.IncludeUsage)
			}
		})
	}
}

func chunks0ID(chunks []chunkOf, id string) string {
	if len(chunks) == 0 {
		return id
	}
	return chunks[0].ID
}
