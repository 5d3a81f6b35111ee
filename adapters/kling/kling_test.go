package kling

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

const (
	access = "ak-kling-test-0001"
	secret = "sk-kling-test-secret-0001"
)

func setup(t *testing.T) (*gatewaytest.FakeKling, Adapter, *adapters.Upstream) {
	t.Helper()
	f := gatewaytest.NewFakeKling(t, access, secret)
	a := Adapter{}
	if err := a.Provision(caddyContext()); err != nil {
		t.Fatal(err)
	}
	return f, a, &adapters.Upstream{Channel: "kl", BaseURL: f.BaseURL(), Key: access + ":" + secret, Model: "kling-v2-1-master"}
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

func TestTextToVideoSubmitRunFinish(t *testing.T) {
	f, a, up := setup(t)
	seconds := 10
	meta := json.RawMessage(`{"cfg_scale":0.7,"camera_control":{"type":"simple","config":{"zoom":5}},"external_task_id":"mine-1"}`)
	id, err := a.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{
		Model: "kling-v2-1-master", Prompt: "a fox in the snow", NegativePrompt: "blur", AspectRatio: "9:16", Duration: seconds,
		Metadata: meta, CallbackURL: "https://hooks.example.com/kling?sig=a%2Fb&x=1",
	})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if id != "text2video/"+job.ID || job.Path != "/v1/videos/text2video" {
		t.Fatalf("upstream id %q for job %s at %s", id, job.ID, job.Path)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(job.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"model_name": `"kling-v2-1-master"`, "prompt": `"a fox in the snow"`, "negative_prompt": `"blur"`, "aspect_ratio": `"9:16"`,
		"duration": `"10"`, "callback_url": `"https://hooks.example.com/kling?sig=a%2Fb&x=1"`,
		"cfg_scale": `0.7`, "camera_control": `{"type":"simple","config":{"zoom":5}}`, "external_task_id": `"mine-1"`,
	}
	for k, v := range want {
		if string(body[k]) != v {
			t.Errorf("body.%s = %s, want %s (body %s)", k, body[k], v, job.Body)
		}
	}
	var cb string
	_ = json.Unmarshal(body["callback_url"], &cb)
	if cb != "https://hooks.example.com/kling?sig=a%2Fb&x=1" {
		t.Errorf("callback_url reached Kling as %q", cb)
	}

	if st := poll(t, a, up, id); st.Status != adapters.TaskNotStarted {
		t.Fatalf("queued job reads %+v", st)
	}
	f.Run(job.ID)
	if st := poll(t, a, up, id); st.Status != adapters.TaskRunning {
		t.Fatalf("running job reads %+v", st)
	}
	f.Finish(job.ID)
	st := poll(t, a, up, id)
	if st.Status != adapters.TaskFinished || st.Progress != 100 || st.Seconds != 10 ||
		len(st.Files) != 1 || st.Files[0].URL != job.VideoURL || st.Files[0].Type != adapters.FileVideo {
		t.Fatalf("finished job reads %+v", st)
	}
	resp, err := http.Get(st.Files[0].URL)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "video/mp4" {
		t.Fatalf("the video's URL answers %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestImageToVideoFails(t *testing.T) {
	f, a, up := setup(t)
	up.Model = "kling-v2-1" // image-to-video only
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	id, err := a.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{
		Prompt: "it moves", Image: "data:image/png;base64," + png,
	})
	if err != nil {
		t.Fatalf("SubmitTask: %v", err)
	}
	job := f.Last(t)
	if id != "image2video/"+job.ID {
		t.Fatalf("upstream id %q", id)
	}
	var body struct{ Image, Duration string }
	_ = json.Unmarshal(job.Body, &body)
	if body.Image != png || body.Duration != "" {
		t.Fatalf("Kling got image %q duration %q: wants bare base64 and its default length", body.Image, body.Duration)
	}
	f.Run(job.ID)
	f.Fail(job.ID, "Failure to pass the risk control system")
	st := poll(t, a, up, id)
	if st.Status != adapters.TaskFailed || st.Error != "Failure to pass the risk control system" || len(st.Files) != 0 {
		t.Fatalf("failed job reads %+v", st)
	}
	// the task is read back only at its own endpoint
	if _, err := a.PollTask(context.Background(), http.DefaultClient, up, "text2video/"+job.ID); asError(t, err).Status != http.StatusNotFound {
		t.Fatalf("reading an image2video task at text2video: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	f, a, up := setup(t)
	seed := int64(3)
	cases := []struct {
		name   string
		up     adapters.Upstream
		req    adapters.TaskRequest
		status int
		says   string
	}{
		{"owned mode", *up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"mode":"pro"}`)}, 400, "metadata.mode"},
		{"owned model_name", *up, adapters.TaskRequest{Prompt: "p", Metadata: json.RawMessage(`{"model_name":"kling-v1"}`)}, 400, "metadata.model_name"},
		{"seed", *up, adapters.TaskRequest{Prompt: "p", Seed: &seed}, 400, "no seed"},
		{"size", *up, adapters.TaskRequest{Prompt: "p", Size: "1280x720"}, 400, "aspect_ratio"},
		{"length", *up, adapters.TaskRequest{Prompt: "p", Duration: 7}, 400, "5 or 10"},
		{"no prompt", *up, adapters.TaskRequest{}, 400, "needs a prompt"},
		{"text to an image-only model", adapters.Upstream{Channel: "kl", BaseURL: up.BaseURL, Key: up.Key, Model: "kling-v2-1"}, adapters.TaskRequest{Prompt: "p"}, 400, "image only: give image"},
		{"image and ratio", *up, adapters.TaskRequest{Image: "https://img.example.com/a.png", AspectRatio: "1:1"}, 400, "remove aspect_ratio"},
		{"not an image", *up, adapters.TaskRequest{Image: "not base64!"}, 400, "http(s) URL"},
		// Kling's own refusals, in its words
		{"vendor: unknown model", adapters.Upstream{Channel: "kl", BaseURL: up.BaseURL, Key: up.Key, Model: "kling-v9"}, adapters.TaskRequest{Prompt: "p"}, 400, "model_name kling-v9 is invalid"},
		{"vendor: bad ratio", *up, adapters.TaskRequest{Prompt: "p", AspectRatio: "4:3"}, 400, "aspect_ratio must be one of"},
		{"vendor: wrong secret", adapters.Upstream{Channel: "kl", BaseURL: up.BaseURL, Key: access + ":wrong-secret", Model: up.Model}, adapters.TaskRequest{Prompt: "p"}, 401, "Authentication failed"},
		{"vendor: wrong access key", adapters.Upstream{Channel: "kl", BaseURL: up.BaseURL, Key: "ak-other:" + secret, Model: up.Model}, adapters.TaskRequest{Prompt: "p"}, 401, "Authentication failed"},
		{"key without secret", adapters.Upstream{Channel: "kl", BaseURL: up.BaseURL, Key: access, Model: up.Model}, adapters.TaskRequest{Prompt: "p"}, 500, "<access key>:<secret key>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.Jobs())
			_, err := a.SubmitTask(context.Background(), http.DefaultClient, &c.up, &c.req)
			e := asError(t, err)
			if e.Status != c.status || !strings.Contains(e.Message, c.says) {
				t.Fatalf("got %d %q, want %d saying %q", e.Status, e.Message, c.status, c.says)
			}
			if e.Status == 401 && e.Fault != adapters.FaultChannel {
				t.Errorf("a refused token is the channel's fault: %+v", e)
			}
			if strings.Contains(e.Message, secret) {
				t.Errorf("the error shows the secret: %q", e.Message)
			}
			if len(f.Jobs()) != before {
				t.Errorf("a refused task was accepted")
			}
		})
	}
}

func TestTokenLifetime(t *testing.T) {
	f, a, up := setup(t)
	id, err := a.SubmitTask(context.Background(), http.DefaultClient, up, &adapters.TaskRequest{Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	// a token signed 31 minutes ago has expired
	a.now = func() time.Time { return time.Now().Add(-31 * time.Minute) }
	_, err = a.PollTask(context.Background(), http.DefaultClient, up, id)
	if e := asError(t, err); e.Status != 401 || e.Code != "1004" || !strings.Contains(e.Message, "expired") {
		t.Fatalf("an expired token: %+v", e)
	}
	// one signed for the future is not valid yet
	a.now = func() time.Time { return time.Now().Add(time.Minute) }
	_, err = a.PollTask(context.Background(), http.DefaultClient, up, id)
	if e := asError(t, err); e.Status != 401 || e.Code != "1003" {
		t.Fatalf("a token not yet valid: %+v", e)
	}
	// a shorter token_ttl is honoured: 2 minutes old with a 1m lifetime
	short := a
	short.now = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	short.TokenTTL = caddy.Duration(time.Minute)
	if _, err := short.PollTask(context.Background(), http.DefaultClient, up, id); asError(t, err).Code != "1004" {
		t.Fatalf("token_ttl 1m, signed 2m ago: %v", err)
	}
	a.now = nil
	if _, err := a.PollTask(context.Background(), http.DefaultClient, up, id); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	// only the fresh token got past Kling's check
	if f.Polls() != 1 {
		t.Fatalf("Kling read the task %d times, want 1", f.Polls())
	}
}

func TestServesNoChat(t *testing.T) {
	a := Adapter{}
	if !a.CallbackCapable() || !taskOnly(a) {
		t.Fatal("kling takes callbacks and serves tasks only")
	}
}

func TestDecodeError(t *testing.T) {
	e := Adapter{}.DecodeError(429, []byte(`{"code":1302,"message":"The API request is too fast","request_id":"r"}`))
	if e.Status != 429 || e.Type != adapters.ErrRateLimit || e.Message != "The API request is too fast" || e.Fault != adapters.FaultByStatus {
		t.Fatalf("%+v", e)
	}
	e = Adapter{}.DecodeError(403, []byte(`{"code":1102,"message":"Account resource pack depleted","request_id":"r"}`))
	if e.Fault != adapters.FaultChannel {
		t.Fatalf("an empty account is the channel's fault: %+v", e)
	}
	e = Adapter{}.DecodeError(502, []byte(`<html>bad gateway</html>`))
	if e.Status != 502 || !strings.Contains(e.Message, "502") {
		t.Fatalf("%+v", e)
	}
}

func TestCaddyfile(t *testing.T) {
	var a Adapter
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("kling {\n token_ttl 10m\n}")); err != nil || time.Duration(a.TokenTTL) != 10*time.Minute {
		t.Fatalf("token_ttl 10m: %v %v", a.TokenTTL, err)
	}
	for in, says := range map[string]string{
		"kling {\n token_ttl 10s\n}": "at least 1m",
		"kling {\n colour blue\n}":   `unrecognized kling adapter option "colour"`,
	} {
		var a Adapter
		if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want %q", in, err, says)
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
