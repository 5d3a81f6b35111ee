package openai

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// doerFunc answers the adapter's requests in the test.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func answer(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestSoraSubmitForm(t *testing.T) {
	var fields map[string]string
	var image []byte
	do := doerFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.String() != "https://api.example/v1/videos" || r.Header.Get("Authorization") != "Bearer sk-chan" {
			t.Fatalf("sent %s with %q", r.URL, r.Header.Get("Authorization"))
		}
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		mr := multipart.NewReader(r.Body, params["boundary"])
		fields = map[string]string{}
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			if p.FormName() == "input_reference" {
				image = b
				continue
			}
			fields[p.FormName()] = string(b)
		}
		return answer(200, `{"id":"video_1","object":"video","status":"queued","progress":0}`), nil
	})
	up := &adapters.Upstream{BaseURL: "https://api.example", Key: "sk-chan", Model: "sora-2"}
	id, err := Adapter{}.SubmitTask(context.Background(), do, up, &adapters.TaskRequest{Model: "sora-2", Prompt: "kite",
		Duration: 8, AspectRatio: "9:16", Image: "data:image/png;base64,iVBORw0K", Metadata: json.RawMessage(`{"remix":"no","n":2}`)})
	if err != nil || id != "video_1" {
		t.Fatalf("submit: %q %v", id, err)
	}
	want := map[string]string{"model": "sora-2", "prompt": "kite", "seconds": "8", "size": "720x1280", "remix": "no", "n": "2"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("field %s = %q, want %q (all: %v)", k, fields[k], v, fields)
		}
	}
	if len(image) == 0 {
		t.Error("no input_reference")
	}

	// the vendor's refusal is its own error, its reason kept
	refuse := doerFunc(func(*http.Request) (*http.Response, error) {
		return answer(400, `{"error":{"message":"Invalid value: '5'.","type":"invalid_request_error","param":"seconds","code":"invalid_value"}}`), nil
	})
	_, err = Adapter{}.SubmitTask(context.Background(), refuse, up, &adapters.TaskRequest{Prompt: "x", Duration: 5})
	if e, ok := err.(*adapters.Error); !ok || e.Status != 400 || e.Message != "Invalid value: '5'." {
		t.Fatalf("refusal: %v", err)
	}
}

func TestSoraPollStates(t *testing.T) {
	up := &adapters.Upstream{BaseURL: "https://api.example/", Key: "sk-chan", Model: "sora-2"}
	tests := []struct {
		body string
		want adapters.TaskState
	}{
		{`{"id":"v","status":"queued","progress":0}`, adapters.TaskState{Status: adapters.TaskNotStarted}},
		{`{"id":"v","status":"in_progress","progress":55}`, adapters.TaskState{Status: adapters.TaskRunning, Progress: 55}},
		{`{"id":"v","status":"completed","progress":100,"seconds":"12"}`, adapters.TaskState{Status: adapters.TaskFinished, Progress: 100, Seconds: 12,
			Files: []adapters.TaskFile{{URL: "https://api.example/v1/videos/v/content", Type: adapters.FileVideo}}}},
		{`{"id":"v","status":"failed","progress":10,"error":{"code":"moderation_blocked","message":"blocked"}}`, adapters.TaskState{Status: adapters.TaskFailed, Progress: 10, Error: "moderation_blocked: blocked"}},
	}
	for _, tt := range tests {
		do := doerFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet || r.URL.Path != "/v1/videos/v" {
				t.Fatalf("polled %s %s", r.Method, r.URL)
			}
			return answer(200, tt.body), nil
		})
		st, err := Adapter{}.PollTask(context.Background(), do, up, "v")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(st)
		want, _ := json.Marshal(tt.want)
		if string(got) != string(want) {
			t.Errorf("%s: got %s, want %s", tt.body, got, want)
		}
	}
	odd := doerFunc(func(*http.Request) (*http.Response, error) { return answer(200, `{"id":"v","status":"paused"}`), nil })
	if _, err := (Adapter{}).PollTask(context.Background(), odd, up, "v"); err == nil {
		t.Fatal("an unknown status was accepted")
	}
	req, err := Adapter{}.FetchFile(context.Background(), up, "v", adapters.TaskFile{})
	if err != nil || req.URL.String() != "https://api.example/v1/videos/v/content" || req.Header.Get("Authorization") != "Bearer sk-chan" {
		t.Fatalf("file request %v %v", req, err)
	}
}
