package vidu

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

const key = "vda-test-key-0001"

func setup(t *testing.T, model string) (*gatewaytest.FakeVidu, *adapters.Upstream) {
	t.Helper()
	f := gatewaytest.NewFakeVidu(t, key)
	return f, &adapters.Upstream{Channel: "vd", BaseURL: f.BaseURL(), Key: key, Model: model}
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

func members(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTextToVideoSubmitRunFinish(t *testing.T) {
	f, up := setup(t, "viduq1")
	seed := int64(42)
	id, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{
		Model: "viduq1", Prompt: "an astronaut in fog", Duration: 5, AspectRatio: "1:1", Size: "1080P", Seed: &seed,
		Metadata:    json.RawMessage(`{"style":"anime","movement_amplitude":"small","payload":"order <7> & co","bgm":true}`),
		CallbackURL: "https://hooks.example.com/vidu?a=1&b=%20",
	})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if id != job.ID || job.Path != "/ent/v2/text2video" {
		t.Fatalf("upstream id %q, job %s at %s", id, job.ID, job.Path)
	}
	body := members(t, job.Body)
	for k, v := range map[string]string{
		"model": `"viduq1"`, "prompt": `"an astronaut in fog"`, "duration": `5`, "aspect_ratio": `"1:1"`, "resolution": `"1080p"`,
		"seed": `42`, "callback_url": `"https://hooks.example.com/vidu?a=1&b=%20"`,
		"style": `"anime"`, "movement_amplitude": `"small"`, "payload": `"order <7> & co"`, "bgm": `true`,
	} {
		if string(body[k]) != v {
			t.Errorf("body.%s = %s, want %s", k, body[k], v)
		}
	}
	if _, has := body["images"]; has {
		t.Error("text-to-video sent images")
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
	if st.Status != adapters.TaskFinished || len(st.Files) != 1 || st.Files[0].URL != job.VideoURL || st.Files[0].Type != adapters.FileVideo {
		t.Fatalf("finished: %+v", st)
	}
}

func TestImageToVideoFails(t *testing.T) {
	f, up := setup(t, "viduq2-pro")
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	id, err := Adapter{}.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{Prompt: "it waves", Image: png, Duration: 8})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if job.Path != "/ent/v2/img2video" || string(members(t, job.Body)["images"]) != `["data:image/png;base64,`+png+`"]` {
		t.Fatalf("img2video got %s at %s: bare base64 goes as a data: URL with its type", job.Body, job.Path)
	}
	f.Fail(job.ID, "AuditSubmitIllegal")
	if st := poll(t, up, id); st.Status != adapters.TaskFailed || st.Error != "AuditSubmitIllegal" {
		t.Fatalf("failed: %+v", st)
	}
	if _, err := (Adapter{}).PollTask(context.Background(), http.DefaultClient, up, "no-such-task"); asError(t, err).Status != 404 {
		t.Fatalf("an unknown task: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	f, up := setup(t, "viduq1")
	other := func(model, k string) *adapters.Upstream {
		return &adapters.Upstream{Channel: "vd", BaseURL: up.BaseURL, Key: k, Model: model}
	}
	cases := []struct {
		name   string
		up     *adapters.Upstream
		req    adapters.TaskRequest
		status int
		says   string
	}{
		{"owned duration", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"duration":8}`)}, 400, "metadata.duration"},
		{"owned resolution", up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"resolution":"1080p"}`)}, 400, "metadata.resolution"},
		{"negative prompt", up, adapters.TaskRequest{Prompt: "p", NegativePrompt: "rain"}, 400, "no negative_prompt"},
		{"size in pixels", up, adapters.TaskRequest{Prompt: "p", Size: "1280x720"}, 400, "360p, 540p, 720p or 1080p"},
		{"image and ratio", up, adapters.TaskRequest{Image: "https://img.example.com/a.png", AspectRatio: "16:9"}, 400, "remove aspect_ratio"},
		{"no prompt", up, adapters.TaskRequest{}, 400, "needs a prompt"},
		{"length viduq1 does not make", up, adapters.TaskRequest{Prompt: "p", Duration: 1}, 400, "viduq1 makes videos of 5 seconds only, not 1"},
		{"length past viduq2's", other("viduq2", key), adapters.TaskRequest{Prompt: "p", Duration: 11}, 400, "viduq2 makes videos of 1 to 10 seconds, not 11"},
		{"length vidu2.0 does not make", other("vidu2.0", key), adapters.TaskRequest{Image: "https://img.example.com/a.png", Duration: 5}, 400, "vidu2.0 makes videos of 4 or 8 seconds, not 5"},
		{"length past an unknown model's", other("viduq9", key), adapters.TaskRequest{Prompt: "p", Duration: 17}, 400, "viduq9 makes videos of 1 to 16 seconds, not 17"},
		{"vendor: ratio", up, adapters.TaskRequest{Prompt: "p", AspectRatio: "2:1"}, 400, `aspect_ratio "2:1" is invalid`},
		{"vendor: model", other("vidu2.0", key), adapters.TaskRequest{Prompt: "p"}, 400, `model "vidu2.0" is not supported by text2video`},
		{"vendor: key", other("viduq1", "vda-wrong"), adapters.TaskRequest{Prompt: "p"}, 401, "invalid api key"},
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
				t.Errorf("a refused key is the channel's fault")
			}
			if len(f.Jobs()) != before {
				t.Error("a refused task was accepted")
			}
		})
	}
}

func TestProvider(t *testing.T) {
	a := Adapter{}
	if !a.CallbackCapable() || !taskOnly(a) {
		t.Fatal("vidu takes callbacks and serves tasks only")
	}
	e := a.DecodeError(403, []byte(`{"code":403,"reason":"CreditInsufficient","message":"credit insufficient"}`))
	if e.Fault != adapters.FaultChannel || e.Message != "credit insufficient" || e.Code != "CreditInsufficient" {
		t.Fatalf("%+v", e)
	}
	var m Adapter
	if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser("vidu {\n x 1\n}")); err == nil || !strings.Contains(err.Error(), "takes no options") {
		t.Fatalf("options for vidu: %v", err)
	}
}

// TestDurations: every length Vidu's reference lists for a model is sent,
// and no other.
func TestDurations(t *testing.T) {
	for model, want := range map[string][]int{
		"viduq1": {5}, "viduq1-classic": {5}, "vidu2.0": {4, 8}, "vidu1.5": {4, 8},
		"viduq2": span(1, 10), "viduq2-pro": span(1, 10), "viduq2-turbo": span(1, 10),
		"viduq3-pro": span(1, 16), "viduq3-turbo": span(1, 16), "a-model-vidu-adds-later": span(1, 16),
	} {
		for d := -1; d <= 20; d++ {
			err := checkDuration(model, d)
			if ok := d == 0 || slices.Contains(want, d); ok != (err == nil) {
				t.Errorf("%s, %d seconds: %v", model, d, err)
			}
		}
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
