package seedance

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

const key = "ark-test-key-0001"

func setup(t *testing.T, model string) (*gatewaytest.FakeSeedance, *adapters.Upstream) {
	t.Helper()
	f := gatewaytest.NewFakeSeedance(t, key)
	return f, &adapters.Upstream{Channel: "sd", BaseURL: f.BaseURL(), Key: key, Model: model}
}

func poll(t *testing.T, up *adapters.Upstream, id string) *adapters.TaskState {
	t.Helper()
	st, err := Adapter{}.PollTask(context.Background(), http.DefaultClient, up, id)
	if err != nil {
		t.Fatalf("PollTask: %v", err)
	}
	return st
}

func asError(t *testing.T, err error) *adapters.Error {
	t.Helper()
	var e *adapters.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want an *adapters.Error", err)
	}
	return e
}

func TestTextToVideoSubmitRunFinish(t *testing.T) {
	f, up := setup(t, "seedance-1-0-pro-250528")
	seed := int64(11)
	id, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{
		Prompt: "a detective enters a dim room", Duration: 10, AspectRatio: "21:9", Size: "720p", Seed: &seed,
		Metadata:    json.RawMessage(`{"return_last_frame":false,"watermark":true,"camera_fixed":true}`),
		CallbackURL: "https://hooks.example.com/ark/cb?t=1&u=%2F",
	})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if id != job.ID {
		t.Fatalf("upstream id %q, job %s", id, job.ID)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(job.Body, &body); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"model":        `"seedance-1-0-pro-250528"`,
		"content":      `[{"type":"text","text":"a detective enters a dim room --duration 10 --ratio 21:9 --resolution 720p --seed 11"}]`,
		"callback_url": `"https://hooks.example.com/ark/cb?t=1&u=%2F"`,
		"watermark":    `true`, "camera_fixed": `true`, "return_last_frame": `false`,
	} {
		if string(body[k]) != v {
			t.Errorf("body.%s = %s, want %s", k, body[k], v)
		}
	}
	if st := poll(t, up, id); st.Status != adapters.TaskNotStarted {
		t.Fatalf("queued: %+v", st)
	}
	f.Run(job.ID)
	if st := poll(t, up, id); st.Status != adapters.TaskRunning {
		t.Fatalf("running: %+v", st)
	}
	f.Finish(job.ID)
	st := poll(t, up, id)
	if st.Status != adapters.TaskFinished || st.Seconds != 10 || len(st.Files) != 1 || st.Files[0].URL != job.VideoURL {
		t.Fatalf("finished: %+v", st)
	}
}

func TestImageToVideoFails(t *testing.T) {
	f, up := setup(t, "doubao-seedance-1-0-lite-i2v-250428")
	id, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{Image: "https://img.example.com/first.png"})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	var body struct{ Content json.RawMessage }
	_ = json.Unmarshal(job.Body, &body)
	if string(body.Content) != `[{"type":"image_url","image_url":{"url":"https://img.example.com/first.png"},"role":"first_frame"}]` {
		t.Fatalf("content %s", body.Content)
	}
	f.Run(job.ID)
	f.Fail(job.ID, "The output video may contain sensitive information.")
	if st := poll(t, up, id); st.Status != adapters.TaskFailed || st.Error != "The output video may contain sensitive information." {
		t.Fatalf("failed: %+v", st)
	}
	if _, err := (Adapter{}).PollTask(context.Background(), http.DefaultClient, up, "cgt-none"); asError(t, err).Status != 404 {
		t.Fatalf("an unknown task: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	f, up := setup(t, "doubao-seedance-1-0-pro-250528")
	with := func(model, k string) *adapters.Upstream {
		return &adapters.Upstream{Channel: "sd", BaseURL: up.BaseURL, Key: k, Model: model}
	}
	cases := []struct {
		name   string
		up     *adapters.Upstream
		req    adapters.TaskRequest
		status int
		says   string
	}{
		{"owned content", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"content":[]}`)}, 400, "metadata.content"},
		{"owned resolution", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"resolution":"1080p"}`)}, 400, "metadata.resolution"},
		{"billed text command", up, adapters.TaskRequest{Prompt: "a cat --dur 12"}, 400, `"--dur"`},
		{"negative prompt", up, adapters.TaskRequest{Prompt: "p", NegativePrompt: "x"}, 400, "no negative_prompt"},
		{"length", up, adapters.TaskRequest{Prompt: "p", Duration: 20}, 400, "2 to 12 seconds"},
		{"size in pixels", up, adapters.TaskRequest{Prompt: "p", Size: "1920x1080"}, 400, "480p, 720p or 1080p"},
		{"image to a text-only model", with("doubao-seedance-1-0-lite-t2v-250428", key), adapters.TaskRequest{Prompt: "p", Image: "https://img.example.com/a.png"}, 400, "text only"},
		{"text to an image-only model", with("doubao-seedance-1-0-lite-i2v-250428", key), adapters.TaskRequest{Prompt: "p"}, 400, "give image"},
		{"vendor: ratio", up, adapters.TaskRequest{Prompt: "p", AspectRatio: "5:4"}, 400, "not a supported ratio"},
		{"vendor: model", with("seedance-9", key), adapters.TaskRequest{Prompt: "p"}, 404, "does not exist"},
		{"vendor: key", with(up.Model, "ark-wrong"), adapters.TaskRequest{Prompt: "p"}, 401, "missing or invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.Jobs())
			_, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, c.up, &c.req)
			e := asError(t, err)
			if e.Status != c.status || !strings.Contains(e.Message, c.says) {
				t.Fatalf("got %d %q, want %d saying %q", e.Status, e.Message, c.status, c.says)
			}
			if c.status == 401 && e.Fault != adapters.FaultChannel {
				t.Error("a refused key is the channel's fault")
			}
			if len(f.Jobs()) != before {
				t.Error("a refused task was accepted")
			}
		})
	}
}

func TestProvider(t *testing.T) {
	a := Adapter{}
	if !taskOnly(a) {
		t.Fatal("seedance serves tasks only")
	}
	if !a.CallbackCapable() {
		t.Fatal("Ark takes callback_url")
	}
	e := a.DecodeError(403, []byte(`{"error":{"code":"AccountOverdueError","message":"overdue","type":"Forbidden"}}`))
	if e.Fault != adapters.FaultChannel || e.Message != "overdue" {
		t.Fatalf("%+v", e)
	}
}

// taskOnly reports whether p has the task capability and no other, so the
// engine never relays it a chat, rerank, media or Realtime request.
func taskOnly(p adapters.Provider) bool {
	_, tasks := p.(adapters.TaskProvider)
	_, chat := p.(adapters.ChatProvider)
	_, rerank := p.(adapters.RerankProvider)
	_, media := p.(adapters.MediaProvider)
	_, realtime := p.(adapters.RealtimeProvider)
	return tasks && !chat && !rerank && !media && !realtime
}
