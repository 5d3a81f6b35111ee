package gemini

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// doFunc is a Doer answering from a handler.
type doFunc func(w http.ResponseWriter, r *http.Request)

func (f doFunc) Do(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	f(w, r)
	return w.Result(), nil
}

var batchUp = &adapters.Upstream{Channel: "gem", BaseURL: "http://gem.test/", Key: "sk-gem", Model: "gemini-2.5-flash"}

func chatLine(id, text string) adapters.BatchLine {
	max := int64(50)
	return adapters.BatchLine{CustomID: id, Req: &adapters.Request{Op: adapters.OpChat, Model: "gemini-2.5-flash", Dialect: "openai",
		Chat: &adapters.ChatRequest{MaxTokens: &max, Messages: []adapters.Message{{Role: adapters.RoleUser,
			Parts: []adapters.Part{{Type: adapters.PartText, Text: text}}}}}}}
}

func TestSubmitBatch(t *testing.T) {
	var got struct {
		Batch struct {
			DisplayName string `json:"display_name"`
			InputConfig struct {
				Requests struct {
					Requests []struct {
						Request  generateRequest   `json:"request"`
						Metadata map[string]string `json:"metadata"`
					} `json:"requests"`
				} `json:"requests"`
			} `json:"input_config"`
		} `json:"batch"`
	}
	var path, key string
	do := doFunc(func(w http.ResponseWriter, r *http.Request) {
		path, key = r.Method+" "+r.URL.Path, r.Header.Get("X-Goog-Api-Key")
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		_, _ = io.WriteString(w, `{"name":"batches/abc123","metadata":{"@type":"type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch","state":"BATCH_STATE_PENDING","batchStats":{"requestCount":"2","pendingRequestCount":"2"}}}`)
	})
	job := &adapters.BatchJob{ID: "batch_x", Endpoint: "/v1/chat/completions", Lines: []adapters.BatchLine{chatLine("a", "hi"), chatLine("b", "yo")}}
	id, err := Adapter{}.SubmitBatch(context.Background(), do, batchUp, job)
	if err != nil {
		t.Fatal(err)
	}
	if id != "batches/abc123" || path != "POST /v1beta/models/gemini-2.5-flash:batchGenerateContent" || key != "sk-gem" {
		t.Fatalf("id %q, %s, key %q", id, path, key)
	}
	reqs := got.Batch.InputConfig.Requests.Requests
	if got.Batch.DisplayName != "batch_x" || len(reqs) != 2 || reqs[1].Metadata["key"] != "b" ||
		len(reqs[1].Request.Contents) != 1 || reqs[1].Request.Contents[0].Role != "user" || *reqs[1].Request.Contents[0].Parts[0].Text != "yo" ||
		reqs[0].Request.GenerationConfig == nil || reqs[0].Request.GenerationConfig.MaxOutputTokens == nil || *reqs[0].Request.GenerationConfig.MaxOutputTokens != 50 {
		t.Fatalf("sent %+v", got)
	}

	// a line that came untranslated, or Gemini's error, is refused
	job.Lines[0].Req = nil
	if _, err := (Adapter{}).SubmitBatch(context.Background(), do, batchUp, job); err == nil {
		t.Fatal("a line with no neutral request was sent")
	}
	// past Gemini's bound on inline requests: refused before it is sent
	sent := false
	spy := doFunc(func(w http.ResponseWriter, r *http.Request) { sent = true })
	huge := &adapters.BatchJob{ID: "batch_y", Lines: []adapters.BatchLine{chatLine("a", strings.Repeat("x", MaxInlineBatch))}}
	_, err = Adapter{}.SubmitBatch(context.Background(), spy, batchUp, huge)
	if ae, ok := err.(*adapters.Error); !ok || ae.Status != 400 || sent {
		t.Fatalf("a batch past 20 MB: %v (sent: %v)", err, sent)
	}
	job.Lines[0] = chatLine("a", "hi")
	refuse := doFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"error":{"code":400,"message":"* batch.display_name: Field is required","status":"INVALID_ARGUMENT"}}`)
	})
	_, err = Adapter{}.SubmitBatch(context.Background(), refuse, batchUp, job)
	if ae, ok := err.(*adapters.Error); !ok || ae.Status != 400 || !strings.Contains(ae.Message, "display_name") {
		t.Fatalf("a refusal: %v", err)
	}
}

func TestPollBatch(t *testing.T) {
	answer := func(body string) doFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.URL.Path != "/v1beta/batches/abc" || r.Header.Get("X-Goog-Api-Key") != "sk-gem" {
				w.WriteHeader(404)
				_, _ = io.WriteString(w, `{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`)
				return
			}
			_, _ = io.WriteString(w, body)
		}
	}
	big := `{"response":{"candidates":[{"content":{"parts":[{"text":"` + strings.Repeat("x", 3<<20) + `"}]}}]},"metadata":{"key":"a"}}`
	for _, tc := range []struct {
		name, body string
		want       adapters.BatchState
	}{
		{"pending", `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_PENDING","batchStats":{"requestCount":"4","pendingRequestCount":"4"}}}`,
			adapters.BatchState{Total: 4}},
		{"running", `{"name":"batches/abc","metadata":{"batchStats":{"requestCount":"4","successfulRequestCount":"1","failedRequestCount":"1","pendingRequestCount":"2"},"state":"BATCH_STATE_RUNNING"}}`,
			adapters.BatchState{Total: 4, Done: 2}},
		{"succeeded, its answers skipped", `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_SUCCEEDED","output":{"inlinedResponses":{"inlinedResponses":[` + big + `]}},"batchStats":{"requestCount":"1","successfulRequestCount":"1"}},"done":true,"response":{"inlinedResponses":{"inlinedResponses":[` + big + `]}}}`,
			adapters.BatchState{Ended: true, Total: 1, Done: 1}},
		{"cancelled", `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_CANCELLED"},"done":true}`, adapters.BatchState{Ended: true}},
		{"expired", `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_EXPIRED"},"done":true}`, adapters.BatchState{Ended: true}},
		{"failed", `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_FAILED"},"done":true,"error":{"code":3,"message":"bad input"}}`,
			adapters.BatchState{Ended: true, Failed: true, Error: "Gemini failed the batch: bad input"}},
		{"no state, cancelled operation", `{"name":"batches/abc","done":true,"error":{"code":1,"message":"CANCELLED"}}`, adapters.BatchState{Ended: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Adapter{}.PollBatch(context.Background(), answer(tc.body), batchUp, "batches/abc")
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
	if _, err := (Adapter{}).PollBatch(context.Background(), answer(`{"metadata":{"state":"BATCH_STATE_NEW"}}`), batchUp, "batches/abc"); err == nil {
		t.Fatal("an unknown state was read")
	}
	_, err := Adapter{}.PollBatch(context.Background(), answer(`{}`), batchUp, "batches/gone")
	if ae, ok := err.(*adapters.Error); !ok || ae.Status != 404 {
		t.Fatalf("a batch the vendor does not know: %v", err)
	}
	// a name leading elsewhere on the vendor's host is not followed
	for _, id := range []string{"batches/../files", "operations/x", "batches/a:cancel", "batches/"} {
		called := false
		spy := doFunc(func(w http.ResponseWriter, r *http.Request) { called = true })
		if _, err := (Adapter{}).PollBatch(context.Background(), spy, batchUp, id); err == nil || called {
			t.Fatalf("%q was polled", id)
		}
	}
}

func TestCancelBatch(t *testing.T) {
	var path string
	do := doFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.Method + " " + r.URL.Path
		_, _ = io.WriteString(w, `{}`)
	})
	if err := (Adapter{}).CancelBatch(context.Background(), do, batchUp, "batches/abc"); err != nil || path != "POST /v1beta/batches/abc:cancel" {
		t.Fatalf("%v %s", err, path)
	}
}

func TestBatchResults(t *testing.T) {
	answers := `[{"response":{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"totalTokenCount":20,"cachedContentTokenCount":4,"thoughtsTokenCount":3},"modelVersion":"gemini-2.5-flash"},"metadata":{"key":"a"}},` +
		`{"error":{"code":3,"message":"line refused"},"metadata":{"key":"b"}},` +
		`{"error":{"code":1,"message":"cancelled"},"metadata":{"key":"c"}}]`
	// the answers come twice, in the batch's output and the operation's
	// response: each is read once
	body := `{"name":"batches/abc","metadata":{"state":"BATCH_STATE_SUCCEEDED","output":{"inlinedResponses":{"inlinedResponses":` + answers + `}}},"done":true,"response":{"@type":"x","inlinedResponses":{"inlinedResponses":` + answers + `}}}`
	do := doFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) })
	var got []*adapters.BatchResult
	err := Adapter{}.BatchResults(context.Background(), do, batchUp, "batches/abc", nil, 1<<20, func(r *adapters.BatchResult) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d results, want 3", len(got))
	}
	a, b, c := got[0], got[1], got[2]
	if a.CustomID != "a" || !a.Succeeded || a.Status != 200 || a.Resp == nil || a.Resp.Message.Parts[0].Text != "ok" ||
		a.Usage.PromptTokens != 12 || a.Usage.CompletionTokens != usageFromWire(&usageMetadata{PromptTokenCount: 12, CandidatesTokenCount: 5, ThoughtsTokenCount: 3, CachedContentTokenCount: 4}).CompletionTokens ||
		a.Usage.CachedTokens != 4 || a.Usage.ReasoningTokens != 3 {
		t.Fatalf("a: %+v", a)
	}
	if b.CustomID != "b" || b.Succeeded || b.Status != 400 || b.Error != "line refused" || c.Status != http.StatusRequestTimeout {
		t.Fatalf("b %+v, c %+v", b, c)
	}
	// bounded: more than max bytes is an error, not a cut batch
	err = Adapter{}.BatchResults(context.Background(), do, batchUp, "batches/abc", nil, 200, func(*adapters.BatchResult) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "more than 200 bytes") {
		t.Fatalf("past the bound: %v", err)
	}
	// an answer without the key its request carried cannot be billed
	nokey := doFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"done":true,"response":{"inlinedResponses":{"inlinedResponses":[{"response":{}}]}}}`)
	})
	if err := (Adapter{}).BatchResults(context.Background(), nokey, batchUp, "batches/abc", nil, 1<<20, func(*adapters.BatchResult) error { return nil }); err == nil {
		t.Fatal("an answer without its key was read")
	}
}
