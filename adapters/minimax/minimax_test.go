package minimax

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

const key = "mmx-test-key-0001"

func setup(t *testing.T, model string) (*gatewaytest.FakeMiniMax, *adapters.Upstream) {
	t.Helper()
	f := gatewaytest.NewFakeMiniMax(t, key)
	return f, &adapters.Upstream{Channel: "mm", BaseURL: f.BaseURL(), Key: key, Model: model}
}

func poll(t *testing.T, a Adapter, up *adapters.Upstream, id string) *adapters.TaskState {
	t.Helper()
	st, err := a.PollTask(context.Background(), http.DefaultClient, up, id)
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

func TestSubmitRunFinishResolvesTheFile(t *testing.T) {
	f, up := setup(t, "MiniMax-Hailuo-02")
	f.GroupID = "1900000001"
	a := Adapter{GroupID: "1900000001"}
	id, err := a.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{
		Prompt: "a man picks up a book [Pedestal up]", Duration: 10, Size: "768p",
		Metadata:    json.RawMessage(`{"prompt_optimizer":false,"fast_pretreatment":true}`),
		CallbackURL: "https://hooks.example.com/mm?x=<1>&y=2",
	})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if id != job.ID {
		t.Fatalf("upstream id %q, job %s", id, job.ID)
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(job.Body, &body)
	for k, v := range map[string]string{
		"model": `"MiniMax-Hailuo-02"`, "prompt": `"a man picks up a book [Pedestal up]"`, "duration": `10`, "resolution": `"768P"`,
		"callback_url": `"https://hooks.example.com/mm?x=<1>&y=2"`, "prompt_optimizer": `false`, "fast_pretreatment": `true`,
	} {
		if string(body[k]) != v {
			t.Errorf("body.%s = %s, want %s", k, body[k], v)
		}
	}
	if st := poll(t, a, up, id); st.Status != adapters.TaskNotStarted {
		t.Fatalf("queued: %+v", st)
	}
	f.Run(job.ID)
	if st := poll(t, a, up, id); st.Status != adapters.TaskRunning {
		t.Fatalf("running: %+v", st)
	}
	f.Finish(job.ID)
	st := poll(t, a, up, id)
	if st.Status != adapters.TaskFinished || len(st.Files) != 1 || st.Files[0].URL != job.VideoURL || st.Files[0].Type != adapters.FileVideo {
		t.Fatalf("finished: %+v (want the file %s resolved to %s)", st, job.FileID, job.VideoURL)
	}
	// without the group id this account's file lookup is refused
	_, err = Adapter{}.PollTask(context.Background(), http.DefaultClient, up, id)
	if e := asError(t, err); e.Status != 400 || !strings.Contains(e.Message, "GroupId") {
		t.Fatalf("file lookup without GroupId: %+v", e)
	}
}

func TestImageToVideoFails(t *testing.T) {
	f, up := setup(t, "I2V-01")
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	id, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{Image: png})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	var body struct {
		FirstFrameImage string `json:"first_frame_image"`
	}
	_ = json.Unmarshal(job.Body, &body)
	if body.FirstFrameImage != "data:image/png;base64,"+png {
		t.Fatalf("first_frame_image %q", body.FirstFrameImage)
	}
	f.Fail(job.ID, "output video sensitive")
	if st := poll(t, Adapter{}, up, id); st.Status != adapters.TaskFailed || st.Error != "output video sensitive" {
		t.Fatalf("failed: %+v", st)
	}
}

func TestRefusals(t *testing.T) {
	f, up := setup(t, "MiniMax-Hailuo-02")
	seed := int64(1)
	with := func(model, k string) *adapters.Upstream {
		return &adapters.Upstream{Channel: "mm", BaseURL: up.BaseURL, Key: k, Model: model}
	}
	cases := []struct {
		name   string
		up     *adapters.Upstream
		req    adapters.TaskRequest
		status int
		says   string
	}{
		{"owned duration", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"duration":10}`)}, 400, "metadata.duration"},
		{"owned first frame", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"first_frame_image":"https://x"}`)}, 400, "metadata.first_frame_image"},
		{"seed", up, adapters.TaskRequest{Prompt: "p", Seed: &seed}, 400, "no seed"},
		{"ratio", up, adapters.TaskRequest{Prompt: "p", AspectRatio: "16:9"}, 400, "no aspect_ratio"},
		{"length", up, adapters.TaskRequest{Prompt: "p", Duration: 5}, 400, "6 or 10 seconds"},
		{"size", up, adapters.TaskRequest{Prompt: "p", Size: "1280x720"}, 400, "512P, 768P or 1080P"},
		{"nothing to make", up, adapters.TaskRequest{}, 400, "needs a prompt"},
		{"vendor: 1080P for 10s", up, adapters.TaskRequest{Prompt: "p", Size: "1080P", Duration: 10}, 400, "1080P supports 6 seconds only"},
		{"vendor: image model without image", with("I2V-01", key), adapters.TaskRequest{Prompt: "p"}, 400, "first_frame_image is required"},
		{"vendor: sensitive", up, adapters.TaskRequest{Prompt: "a forbidden thing"}, 400, "input new_sensitive"},
		{"vendor: key", with(up.Model, "mmx-wrong"), adapters.TaskRequest{Prompt: "p"}, 401, "login fail"},
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
		t.Fatal("minimax serves tasks only")
	}
	if e := a.DecodeError(200, []byte(`{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`)); e.Fault != adapters.FaultChannel || e.Status != 402 {
		t.Fatalf("%+v", e)
	}
	var m Adapter
	if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser("minimax {\n group_id 42\n}")); err != nil || m.GroupID != "42" {
		t.Fatalf("group_id: %v %q", err, m.GroupID)
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
