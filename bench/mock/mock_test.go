package mock

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	return rec
}

func TestCompletionWireFormat(t *testing.T) {
	h := New(0)
	rec := post(t, h, string(load.ChatBody))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.Bytes()
	if n := len(body); n < 1200 || n > 1600 {
		t.Errorf("body is %d bytes, want about 1.4 KB", n)
	}
	var c struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Created == 0 || c.Model != "gpt-4o-mini" {
		t.Errorf("bad envelope: %+v", c)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content != content || c.Choices[0].FinishReason != "stop" {
		t.Errorf("bad choices: %+v", c.Choices)
	}
	if c.Usage != (usage{PromptTokens, CompletionTokens, PromptTokens + CompletionTokens}) {
		t.Errorf("bad usage: %+v", c.Usage)
	}
	if err := load.ValidateCompletion(rec.Code, body); err != nil {
		t.Error(err)
	}
	if got := h.Stats(); got.Requests != 1 || got.Streams != 0 {
		t.Errorf("stats %+v", got)
	}
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func streamChunks(t *testing.T, body []byte) []chunk {
	t.Helper()
	var out []chunk
	frames := strings.Split(string(body), "\n\n")
	if frames[len(frames)-1] != "" || frames[len(frames)-2] != "data: [DONE]" {
		t.Fatalf("stream does not end with data: [DONE] and a blank line: %q", body[max(0, len(body)-60):])
	}
	for _, f := range frames[:len(frames)-2] {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("frame is not one data line: %q", f)
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamWireFormat(t *testing.T) {
	for _, includeUsage := range []bool{true, false} {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":true}`
		want := StreamChunks
		if includeUsage {
			body = string(load.StreamBody)
			want++
		}
		rec := post(t, New(0), body)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		if !rec.Flushed {
			t.Error("stream was not flushed")
		}
		chunks := streamChunks(t, rec.Body.Bytes())
		if len(chunks) != want {
			t.Fatalf("include_usage %v: %d chunks, want %d", includeUsage, len(chunks), want)
		}
		var text strings.Builder
		for i, c := range chunks {
			if c.ID != chunks[0].ID || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion.chunk" || c.Model != "gpt-4o-mini" {
				t.Errorf("chunk %d: bad envelope %+v", i, c)
			}
			if i == StreamChunks {
				if len(c.Choices) != 0 || c.Usage == nil || c.Usage.TotalTokens != PromptTokens+CompletionTokens {
					t.Errorf("usage chunk: %+v", c)
				}
				continue
			}
			if len(c.Choices) != 1 || c.Usage != nil {
				t.Fatalf("chunk %d: %+v", i, c)
			}
			d := c.Choices[0]
			switch {
			case i == 0:
				if d.Delta.Role == nil || *d.Delta.Role != "assistant" || d.FinishReason != nil {
					t.Errorf("first chunk should carry the role: %+v", d)
				}
			case i == StreamChunks-1:
				if d.FinishReason == nil || *d.FinishReason != "stop" {
					t.Errorf("last chunk should finish: %+v", d)
				}
			default:
				if d.Delta.Content == nil || *d.Delta.Content == "" || d.FinishReason != nil {
					t.Errorf("chunk %d should carry content: %+v", i, d)
				}
			}
			if d.Delta.Content != nil {
				text.WriteString(*d.Delta.Content)
			}
		}
		if text.String() != content {
			t.Errorf("deltas join to %q", text.String())
		}
		events, done, err := load.ReadEvents(bytes.NewReader(rec.Body.Bytes()), nil)
		if events != want || !done || err != nil {
			t.Errorf("ReadEvents: %d, %v, %v", events, done, err)
		}
	}
}

func TestBadRequest(t *testing.T) {
	h := New(0)
	rec := post(t, h, `{"model":`)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Message == "" {
		t.Errorf("status %d body %s", rec.Code, rec.Body)
	}
	if s := h.Stats(); s.Requests != 0 || s.BadRequests != 1 {
		t.Errorf("stats %+v", s)
	}
}
