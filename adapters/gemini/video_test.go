package gemini

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func jsonAnswer(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestVeoSubmitBody(t *testing.T) {
	var sent map[string]any
	do := doerFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.String() != "https://g.example/v1beta/models/veo-3.0-generate-001:predictLongRunning" || r.Header.Get("x-goog-api-key") != "k" {
			t.Fatalf("sent %s", r.URL)
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &sent)
		return jsonAnswer(200, `{"name":"models/veo-3.0-generate-001/operations/abc"}`), nil
	})
	up := &adapters.Upstream{BaseURL: "https://g.example", Key: "k", Model: "veo-3.0-generate-001"}
	id, err := Adapter{}.SubmitTask(context.Background(), do, up, &adapters.TaskRequest{Prompt: "sea", AspectRatio: "16:9",
		NegativePrompt: "fog", Duration: 6, Size: "1080p", Image: "iVBORw0KGgoAAAANSUhEUg==", Metadata: json.RawMessage(`{"personGeneration":"allow_all","aspectRatio":"9:16","lastFrame":{"bytesBase64Encoded":"AA==","mimeType":"image/png"}}`)})
	if err != nil || id != "models/veo-3.0-generate-001/operations/abc" {
		t.Fatalf("submit: %q %v", id, err)
	}
	got, _ := json.Marshal(sent)
	// metadata is the vendor's to choose: it wins over the common field
	want := `{"instances":[{"image":{"bytesBase64Encoded":"iVBORw0KGgoAAAANSUhEUg==","mimeType":"image/png"},"lastFrame":{"bytesBase64Encoded":"AA==","mimeType":"image/png"},"prompt":"sea"}],"parameters":{"aspectRatio":"9:16","durationSeconds":6,"negativePrompt":"fog","personGeneration":"allow_all","resolution":"1080p"}}`
	if string(got) != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	for _, bad := range []*adapters.TaskRequest{{Prompt: "x", Size: "1280x720"}, {Prompt: "x", Seed: new(int64)}} {
		if _, err := (Adapter{}).SubmitTask(context.Background(), do, up, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	rogue := doerFunc(func(*http.Request) (*http.Response, error) { return jsonAnswer(200, `{"name":"../../elsewhere"}`), nil })
	if _, err := (Adapter{}).SubmitTask(context.Background(), rogue, up, &adapters.TaskRequest{Prompt: "x"}); err == nil {
		t.Error("an operation name leaving /v1beta was accepted")
	}
}

func TestVeoPollStates(t *testing.T) {
	up := &adapters.Upstream{BaseURL: "https://g.example", Key: "k"}
	tests := []struct {
		body string
		want adapters.TaskState
	}{
		{`{"name":"models/m/operations/a"}`, adapters.TaskState{Status: adapters.TaskRunning}},
		{`{"name":"models/m/operations/a","done":true,"error":{"code":3,"message":"bad prompt","status":"INVALID_ARGUMENT"}}`, adapters.TaskState{Status: adapters.TaskFailed, Error: "bad prompt"}},
		{`{"name":"models/m/operations/a","done":true,"response":{"generateVideoResponse":{"generatedSamples":[{"video":{"uri":"https://g.example/v1beta/files/x:download?alt=media"}}]}}}`,
			adapters.TaskState{Status: adapters.TaskFinished, Progress: 100, Files: []adapters.TaskFile{{URL: "https://g.example/v1beta/files/x:download?alt=media", Type: adapters.FileVideo}}}},
		{`{"name":"models/m/operations/a","done":true,"response":{"generateVideoResponse":{"raiMediaFilteredCount":1,"raiMediaFilteredReasons":["unsafe content"]}}}`,
			adapters.TaskState{Status: adapters.TaskFailed, Error: "the video was blocked by the vendor's safety filters: unsafe content"}},
		{`{"name":"models/m/operations/a","done":true,"response":{}}`, adapters.TaskState{Status: adapters.TaskFailed, Error: "the operation finished without a video"}},
	}
	for _, tt := range tests {
		do := doerFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.String() != "https://g.example/v1beta/models/m/operations/a" {
				t.Fatalf("polled %s", r.URL)
			}
			return jsonAnswer(200, tt.body), nil
		})
		st, err := Adapter{}.PollTask(context.Background(), do, up, "models/m/operations/a")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(st)
		want, _ := json.Marshal(tt.want)
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.body, got, want)
		}
	}
	if _, err := (Adapter{}).PollTask(context.Background(), nil, up, "models/../x"); err == nil {
		t.Error("a dotted operation name was polled")
	}
	// the key goes only to the channel's own host
	if _, err := (Adapter{}).FetchFile(context.Background(), up, "", adapters.TaskFile{URL: "https://evil.example/x"}); err == nil {
		t.Error("the key would go to another host")
	}
	req, err := Adapter{}.FetchFile(context.Background(), up, "", adapters.TaskFile{URL: "https://g.example/v1beta/files/x:download?alt=media"})
	if err != nil || req.Header.Get("x-goog-api-key") != "k" {
		t.Fatalf("file request: %v %v", req, err)
	}
}
