//lint:file-ignore SA1019 the fake is checked against the SDK's video API, which OpenAI has deprecated: the gateway still serves what it documents

package gatewaytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// TestFakeSoraSpeaksTheSDK drives FakeOpenAI's video API with OpenAI's own
// SDK: what the SDK sends is accepted, what the fake answers the SDK reads.
func TestFakeSoraSpeaksTheSDK(t *testing.T) {
	f := NewFakeOpenAI(t, "sk-fake-sora")
	c := openai.NewClient(option.WithBaseURL(f.URL+"/v1/"), option.WithAPIKey("sk-fake-sora"), option.WithMaxRetries(0))
	ctx := context.Background()
	v, err := c.Videos.New(ctx, openai.VideoNewParams{Prompt: "a kite", Model: openai.VideoModelSora2,
		Seconds: openai.VideoSeconds8, Size: openai.VideoSize1280x720})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != openai.VideoStatusQueued || v.Seconds != "8" || v.Size != "1280x720" || v.Model != "sora-2" {
		t.Fatalf("created %+v", v)
	}
	f.Videos.Progress(v.ID, 30)
	if got, err := c.Videos.Get(ctx, v.ID); err != nil || got.Status != openai.VideoStatusInProgress || got.Progress != 30 {
		t.Fatalf("running: %+v %v", got, err)
	}
	f.Videos.Finish(v.ID)
	if got, err := c.Videos.Get(ctx, v.ID); err != nil || got.Status != openai.VideoStatusCompleted || got.CompletedAt == 0 {
		t.Fatalf("completed: %+v %v", got, err)
	}
	resp, err := c.Videos.DownloadContent(ctx, v.ID, openai.VideoDownloadContentParams{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b, VideoBytes(v.ID)) {
		t.Fatalf("content %q", b)
	}

	// refusals in OpenAI's shape, which the SDK reads as *openai.Error
	_, err = c.Videos.New(ctx, openai.VideoNewParams{Prompt: "x", Seconds: "5"})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "seconds" {
		t.Fatalf("bad seconds: %v", err)
	}
	f.Videos.Fail(v.ID, "too much")
	if got, err := c.Videos.Get(ctx, v.ID); err != nil || got.Status != openai.VideoStatusFailed || got.Error.Message != "too much" {
		t.Fatalf("failed: %+v %v", got, err)
	}
	if _, err := c.Videos.Get(ctx, "video_nope"); !errors.As(err, &oe) || oe.StatusCode != 404 {
		t.Fatalf("unknown video: %v", err)
	}
}

// TestFakeVeoSpeaksTheSDK drives FakeGemini's Veo operations with Google's
// Gen AI SDK, on the Gemini API backend.
func TestFakeVeoSpeaksTheSDK(t *testing.T) {
	f := NewFakeGemini(t, "sk-fake-veo")
	ctx := context.Background()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "sk-fake-veo", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: f.URL}})
	if err != nil {
		t.Fatal(err)
	}
	dur := int32(8)
	op, err := c.Models.GenerateVideos(ctx, "veo-3.0-generate-001", "a lighthouse",
		&genai.Image{ImageBytes: []byte("png bytes"), MIMEType: "image/png"},
		&genai.GenerateVideosConfig{AspectRatio: "16:9", DurationSeconds: &dur, PersonGeneration: "allow_adult", NegativePrompt: "fog"})
	if err != nil {
		t.Fatal(err)
	}
	job := f.Videos.Last(t)
	if op.Done || job.Prompt != "a lighthouse" || string(job.Image) != "png bytes" || job.ImageType != "image/png" ||
		job.Params["durationSeconds"] != 8.0 || job.Params["personGeneration"] != "allow_adult" || job.Params["negativePrompt"] != "fog" {
		t.Fatalf("operation %+v, job %+v", op, job)
	}
	if op, err = c.Operations.GetVideosOperation(ctx, op, nil); err != nil || op.Done {
		t.Fatalf("running: %+v %v", op, err)
	}
	f.Videos.Finish(job.ID)
	if op, err = c.Operations.GetVideosOperation(ctx, op, nil); err != nil || !op.Done || op.Response == nil || len(op.Response.GeneratedVideos) != 1 {
		t.Fatalf("done: %+v %v", op, err)
	}
	b, err := c.Files.Download(ctx, genai.NewDownloadURIFromGeneratedVideo(op.Response.GeneratedVideos[0]), nil)
	if err != nil || !bytes.Equal(b, VideoBytes(job.ID)) {
		t.Fatalf("download %q %v", b, err)
	}

	// a failed operation, and a refused submit in Google's error shape
	op2, err := c.Models.GenerateVideos(ctx, "veo-3.0-generate-001", "second", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job2 := f.Videos.Last(t)
	f.Videos.Fail(job2.ID, "blocked")
	if op2, err = c.Operations.GetVideosOperation(ctx, op2, nil); err != nil || !op2.Done || op2.Error["message"] != "blocked" {
		t.Fatalf("failed: %+v %v", op2, err)
	}
	bad := int32(5)
	_, err = c.Models.GenerateVideos(ctx, "veo-3.0-generate-001", "x", nil, &genai.GenerateVideosConfig{DurationSeconds: &bad})
	var ae genai.APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusBadRequest {
		t.Fatalf("bad duration: %v", err)
	}
}
