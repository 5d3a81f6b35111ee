package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// mediaConfig serves image and audio models on an OpenAI channel, two
// Gemini image models (Imagen and image output) on a Gemini channel, and a
// Claude model whose family has no media endpoints, with the prices the
// tests check.
func mediaConfig(upload string, options ...string) *caddyfile {
	c := gatewayConfig().option("max_upload_size " + upload)
	for _, o := range options {
		c.option(o)
	}
	return c.
		channel("openai", "openai", "{{OPENAI}}", "sk-media-openai", "gpt-image-1 dall-e-3 whisper-1 tts-1").
		channel("gemini", "gemini", "{{GEMINI}}", "sk-media-gemini", "imagen-4.0-generate-001 gemini-2.5-flash-image").
		channel("claude", "anthropic", "{{ANTHROPIC}}", "sk-media-anthropic", "claude-sonnet-4-6").
		price("gpt-image-1",
			"input 5",
			"image_input 10",
			"output 40",
			"image 1024x1024 low 0.011",
			"image 1024x1024 medium 0.042",
			"image 1024x1024 high 0.167",
			"image 1024x1536 high 0.25",
			"image 1536x1024 high 0.25").
		price("dall-e-3",
			"image 1024x1024 standard 0.04",
			"image 1024x1792 standard 0.08",
			"image 1792x1024 standard 0.08",
			"image 1024x1024 hd 0.08",
			"image 1024x1792 hd 0.12",
			"image 1792x1024 hd 0.12").
		price("whisper-1", "audio_second 0.0001").
		price("tts-1", "characters 15").
		price("imagen-4.0-generate-001", "image 0.04").
		price("gemini-2.5-flash-image", "input 0.30", "output 30").
		price("claude-sonnet-4-6", "input 3", "output 15")
}

type mediaSetup struct {
	gw     *gatewaytest.Gateway
	openai *gatewaytest.FakeOpenAI
	gemini *gatewaytest.FakeGemini
	key    string
}

const mediaQuota = 100_000_000 // 100 USD

// startMedia starts the media gateway with uploads up to upload and the
// further gateway options given.
func startMedia(t *testing.T, upload string, options ...string) *mediaSetup {
	t.Helper()
	s := &mediaSetup{
		openai: gatewaytest.NewFakeOpenAI(t, "sk-media-openai"),
		gemini: gatewaytest.NewFakeGemini(t, "sk-media-gemini"),
	}
	claude := gatewaytest.NewFakeAnthropic(t, "sk-media-anthropic")
	s.gw = gatewaytest.Start(t, mediaConfig(upload, options...).String(), gatewaytest.Vars{"OPENAI": s.openai.URL, "GEMINI": s.gemini.URL, "ANTHROPIC": claude.URL})
	s.key = s.gw.AddUser("artist", mediaQuota)
	return s
}

func (s *mediaSetup) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(s.key), option.WithMaxRetries(0))
}

// usageCheck checks the newest usage rows against the costs expected, and
// the balance against their sum.
type usageCheck struct {
	t     *testing.T
	s     *mediaSetup
	rows  int
	spent int64
}

func (u *usageCheck) expect(endpoint, model string, status int, cost int64) {
	u.t.Helper()
	u.rows++
	rows := u.s.gw.WaitUsage("artist", u.rows)
	r := rows[u.rows-1]
	if r.Endpoint != endpoint || r.Model != model || r.Status != status || r.Cost != cost {
		u.t.Fatalf("usage row %d: %s %s status %d cost %d, want %s %s status %d cost %d (error %q)",
			u.rows, r.Endpoint, r.Model, r.Status, r.Cost, endpoint, model, status, cost, r.Error)
	}
	u.spent += cost
}

func (u *usageCheck) balance() {
	u.t.Helper()
	// the writer commits the balance with the rows
	quota, used := u.s.gw.Quota("artist")
	if quota != mediaQuota-u.spent || used != u.spent {
		u.t.Fatalf("quota %d used %d, want %d and %d", quota, used, mediaQuota-u.spent, u.spent)
	}
}

// perMillion is ceil(sum(count*units per million)/1e6), the price table's
// arithmetic written out for the test.
func perMillion(terms ...int64) int64 {
	var sum int64
	for i := 0; i+1 < len(terms); i += 2 {
		sum += terms[i] * terms[i+1]
	}
	return (sum + 999_999) / 1_000_000
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestMediaImages(t *testing.T) {
	s := startMedia(t, "2MB")
	c := s.client()
	ctx := context.Background()
	u := &usageCheck{t: t, s: s}

	t.Run("dall-e-3 generation by URL, billed at its default size and quality", func(t *testing.T) {
		res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "dall-e-3", Prompt: "a lighthouse at dawn"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 1 || !strings.HasPrefix(res.Data[0].URL, "https://images.fake-openai.test/") || res.Data[0].RevisedPrompt != "A revised a lighthouse at dawn" {
			t.Fatalf("answer %+v", res.Data)
		}
		u.expect("/v1/images/generations", "dall-e-3", 200, 40_000)
		// hd and a tall size: the table's dearest dall-e-3 price
		_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "dall-e-3", Prompt: "a tall lighthouse", Size: "1024x1792", Quality: "hd"})
		if err != nil {
			t.Fatal(err)
		}
		u.expect("/v1/images/generations", "dall-e-3", 200, 120_000)
		if got := s.openai.Requests(); got[len(got)-1].Body["model"] != "dall-e-3" || got[len(got)-1].Path != "/v1/images/generations" {
			t.Fatalf("upstream got %v %v", got[len(got)-1].Path, got[len(got)-1].Body)
		}
	})

	t.Run("gpt-image-1 generation billed by its reported tokens", func(t *testing.T) {
		res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "two cats", N: openai.Int(2),
			Size: openai.ImageGenerateParamsSize1024x1024, Quality: openai.ImageGenerateParamsQualityHigh})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 2 {
			t.Fatalf("%d images", len(res.Data))
		}
		for i, d := range res.Data {
			png, err := base64.StdEncoding.DecodeString(d.B64JSON)
			if err != nil || !bytes.Equal(png, gatewaytest.FakePNG(i)) {
				t.Fatalf("image %d is not the upstream's", i)
			}
		}
		if res.Usage.OutputTokens != 2*4160 || res.Usage.InputTokens != gatewaytest.FakeImageTextTokens {
			t.Fatalf("usage %+v", res.Usage)
		}
		u.expect("/v1/images/generations", "gpt-image-1", 200, perMillion(gatewaytest.FakeImageTextTokens, 5_000_000, 2*4160, 40_000_000))
	})

	t.Run("Imagen behind the OpenAI shape", func(t *testing.T) {
		res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "imagen-4.0-generate-001", Prompt: "a red fox", N: openai.Int(2),
			Size: "1792x1024"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 2 || res.Created == 0 {
			t.Fatalf("answer %+v", res)
		}
		for i, d := range res.Data {
			if png, _ := base64.StdEncoding.DecodeString(d.B64JSON); !bytes.Equal(png, gatewaytest.FakePNG(i)) {
				t.Fatalf("image %d is not the upstream's", i)
			}
		}
		reqs := s.gemini.Requests()
		last := reqs[len(reqs)-1]
		params, _ := last.Body["parameters"].(map[string]any)
		if last.Path != "/v1beta/models/imagen-4.0-generate-001:predict" || params["sampleCount"] != float64(2) || params["aspectRatio"] != "16:9" {
			t.Fatalf("Imagen got %s %v", last.Path, last.Body)
		}
		u.expect("/v1/images/generations", "imagen-4.0-generate-001", 200, 2*40_000)
	})

	t.Run("Gemini image output behind the OpenAI shape, billed by tokens", func(t *testing.T) {
		res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "gemini-2.5-flash-image", Prompt: "a blue whale"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 1 || res.Usage.OutputTokens != 1290 || res.Usage.InputTokens != 9 {
			t.Fatalf("answer %+v", res)
		}
		if png, _ := base64.StdEncoding.DecodeString(res.Data[0].B64JSON); !bytes.Equal(png, gatewaytest.FakePNG(0)) {
			t.Fatal("the image is not the upstream's")
		}
		u.expect("/v1/images/generations", "gemini-2.5-flash-image", 200, perMillion(9, 300_000, 1290, 30_000_000))
		// an image URL cannot come from an upstream that answers with bytes
		_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "gemini-2.5-flash-image", Prompt: "x", ResponseFormat: openai.ImageGenerateParamsResponseFormatURL})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "b64_json") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/generations", "gemini-2.5-flash-image", 400, 0)
	})

	t.Run("edit on a Gemini image model: the images go inline, byte for byte", func(t *testing.T) {
		a, b := randomBytes(12, 200<<10), randomBytes(13, 100<<10)
		res, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gemini-2.5-flash-image", Prompt: "put them side by side",
			Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(a), "a.png", "image/png"), openai.File(bytes.NewReader(b), "b.jpg", "image/jpeg")}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 1 || res.Usage.OutputTokens != 1290 {
			t.Fatalf("answer %+v", res)
		}
		reqs := s.gemini.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/v1beta/models/gemini-2.5-flash-image:generateContent" || last.Prompt != "put them side by side" || len(last.Files) != 2 ||
			last.Files[0].SHA256 != sha(a) || last.Files[0].ContentType != "image/png" || last.Files[1].SHA256 != sha(b) || last.Files[1].ContentType != "image/jpeg" {
			t.Fatalf("Gemini got %s %q %+v", last.Path, last.Prompt, last.Files)
		}
		u.expect("/v1/images/edits", "gemini-2.5-flash-image", 200, perMillion(9, 300_000, 1290, 30_000_000))
		// Gemini takes no mask
		_, err = c.Images.Edit(ctx, openai.ImageEditParams{Model: "gemini-2.5-flash-image", Prompt: "x",
			Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader(a), "a.png", "image/png")},
			Mask:  openai.File(bytes.NewReader(b), "m.png", "image/png")})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "mask") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/edits", "gemini-2.5-flash-image", 400, 0)
	})

	t.Run("edit with one image: the upstream receives the exact bytes", func(t *testing.T) {
		img := randomBytes(1, 300<<10)
		res, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gpt-image-1", Prompt: "add a hat",
			Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader(img), "cat.png", "image/png")},
			Size:  openai.ImageEditParamsSize1024x1024, Quality: openai.ImageEditParamsQualityLow})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Data) != 1 {
			t.Fatalf("%d images", len(res.Data))
		}
		reqs := s.openai.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/v1/images/edits" || len(last.Files) != 1 || last.Files[0].SHA256 != sha(img) || last.Files[0].Filename != "cat.png" ||
			last.Files[0].ContentType != "image/png" || last.Body["prompt"] != "add a hat" || last.Body["model"] != "gpt-image-1" {
			t.Fatalf("upstream got %+v %v", last.Files, last.Body)
		}
		u.expect("/v1/images/edits", "gpt-image-1", 200, perMillion(gatewaytest.FakeImageTextTokens, 5_000_000, gatewaytest.FakeImageInputTokens, 10_000_000, 272, 40_000_000))
	})

	t.Run("edit with two images and a mask", func(t *testing.T) {
		a, b, mask := randomBytes(2, 200<<10), randomBytes(3, 150<<10), randomBytes(4, 50<<10)
		_, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gpt-image-1", Prompt: "merge them",
			Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(a), "a.png", "image/png"), openai.File(bytes.NewReader(b), "b.png", "image/png")}},
			Mask:  openai.File(bytes.NewReader(mask), "mask.png", "image/png"),
			Size:  openai.ImageEditParamsSize1024x1024, Quality: openai.ImageEditParamsQualityMedium})
		if err != nil {
			t.Fatal(err)
		}
		reqs := s.openai.Requests()
		files := reqs[len(reqs)-1].Files
		if len(files) != 3 || files[0].Field != "image[]" || files[0].SHA256 != sha(a) || files[1].Field != "image[]" || files[1].SHA256 != sha(b) ||
			files[2].Field != "mask" || files[2].SHA256 != sha(mask) {
			t.Fatalf("upstream got %+v", files)
		}
		u.expect("/v1/images/edits", "gpt-image-1", 200, perMillion(gatewaytest.FakeImageTextTokens, 5_000_000, 2*gatewaytest.FakeImageInputTokens, 10_000_000, 1056, 40_000_000))
	})

	t.Run("refusals", func(t *testing.T) {
		before := len(s.openai.Requests())
		// over max_upload_size: 413, nothing reaches the upstream
		_, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gpt-image-1", Prompt: "too big",
			Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader(randomBytes(5, 3<<20)), "big.png", "image/png")}})
		if e := sdkError(t, err); e.StatusCode != 413 || !strings.Contains(e.Message, "max_upload_size") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/edits", "", 413, 0)

		// a family without an image endpoint
		_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "claude-sonnet-4-6", Prompt: "a cat"})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "claude-sonnet-4-6") || !strings.Contains(e.Message, "image generations") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/generations", "claude-sonnet-4-6", 400, 0)
		// Imagen edits only on Vertex AI, not on the Gemini API
		_, err = c.Images.Edit(ctx, openai.ImageEditParams{Model: "imagen-4.0-generate-001", Prompt: "x",
			Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader([]byte("png")), "a.png", "image/png")}})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "cannot edit images") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/edits", "imagen-4.0-generate-001", 400, 0)

		// no image part
		body, ct := form(t, map[string]string{"model": "gpt-image-1", "prompt": "x"}, nil)
		resp, out := s.gw.Do(http.MethodPost, "/v1/images/edits", s.key, body, http.Header{"Content-Type": {ct}})
		if resp.StatusCode != 400 || !strings.Contains(string(out), "'image'") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/images/edits", "", 400, 0)
		// an edit as JSON, a generation as multipart: the wrong content type
		resp, out = s.gw.Do(http.MethodPost, "/v1/images/edits", s.key, []byte(`{"model":"gpt-image-1","prompt":"x"}`), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(out), "multipart/form-data") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/images/edits", "gpt-image-1", 400, 0) // a refusal whose model is known is counted under it
		body, ct = form(t, map[string]string{"model": "dall-e-3", "prompt": "x"}, nil)
		resp, out = s.gw.Do(http.MethodPost, "/v1/images/generations", s.key, body, http.Header{"Content-Type": {ct}})
		if resp.StatusCode != 400 || !strings.Contains(string(out), "application/json") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/images/generations", "", 400, 0)
		// a size the price table does not price
		_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "dall-e-3", Prompt: "x", Size: "256x256"})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "256x256") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/images/generations", "dall-e-3", 400, 0)
		if n := len(s.openai.Requests()); n != before {
			t.Fatalf("%d refused requests reached the upstream", n-before)
		}
	})

	t.Run("an images answer cut short is billed on the images it carried", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.ImagesBreakAfter = 100 })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.ImagesBreakAfter = 0 })
		_, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "two cats", N: openai.Int(2),
			Size: openai.ImageGenerateParamsSize1024x1024, Quality: openai.ImageGenerateParamsQualityHigh})
		if err == nil {
			t.Fatal("a cut answer was taken")
		}
		// no usage arrived: the one image begun, at the table's price
		u.expect("/v1/images/generations", "gpt-image-1", 502, 167_000)
	})

	t.Run("an upstream failure is refunded", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 500 })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 0 })
		_, err := c.Images.Edit(ctx, openai.ImageEditParams{Model: "gpt-image-1", Prompt: "x",
			Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(bytes.NewReader([]byte("png")), "a.png", "image/png")}})
		if e := sdkError(t, err); e.StatusCode != 502 {
			t.Fatalf("status %d", e.StatusCode)
		}
		u.expect("/v1/images/edits", "gpt-image-1", 502, 0)
	})
	u.balance()
}

// form builds a multipart body by hand, for what the SDK never sends.
func form(t *testing.T, fields map[string]string, files map[string][]byte) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	for k, v := range files {
		w, _ := mw.CreateFormFile(k, k+".bin")
		w.Write(v)
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

func TestMediaAudio(t *testing.T) {
	s := startMedia(t, "25MB")
	c := s.client()
	ctx := context.Background()
	u := &usageCheck{t: t, s: s}
	audio := randomBytes(7, 512<<10)
	// 7.25 s at 0.0001 USD a second
	const transcriptionCost = 725

	params := func(format openai.AudioResponseFormat) openai.AudioTranscriptionNewParams {
		return openai.AudioTranscriptionNewParams{Model: "whisper-1", File: openai.File(bytes.NewReader(audio), "speech.mp3", "audio/mpeg"), ResponseFormat: format}
	}
	t.Run("json and verbose_json", func(t *testing.T) {
		res, err := c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != gatewaytest.FakeTranscriptText() || res.Usage.Seconds != gatewaytest.FakeAudioSeconds {
			t.Fatalf("answer %+v", res)
		}
		last := s.openai.Requests()[len(s.openai.Requests())-1]
		if len(last.Files) != 1 || last.Files[0].SHA256 != sha(audio) || last.Files[0].Filename != "speech.mp3" || last.Body["response_format"] != "json" {
			t.Fatalf("upstream got %+v %v", last.Files, last.Body)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)

		res, err = c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatVerboseJSON))
		if err != nil {
			t.Fatal(err)
		}
		if res.Duration != gatewaytest.FakeAudioSeconds || len(res.Segments) != 2 || res.Language != "english" {
			t.Fatalf("answer %+v", res)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)
	})

	want := map[openai.AudioResponseFormat]struct{ body, ct, upstream string }{
		openai.AudioResponseFormatText: {gatewaytest.FakeTranscriptText() + "\n", "text/plain; charset=utf-8", "json"},
		openai.AudioResponseFormatSRT: {"1\n00:00:00,000 --> 00:00:03,500\nHello from the fake upstream.\n\n2\n00:00:03,500 --> 00:00:07,250\nThis is a test.\n\n",
			"text/plain; charset=utf-8", "verbose_json"},
		openai.AudioResponseFormatVTT: {"WEBVTT\n\n00:00:00.000 --> 00:00:03.500\nHello from the fake upstream.\n\n00:00:03.500 --> 00:00:07.250\nThis is a test.\n\n",
			"text/vtt; charset=utf-8", "verbose_json"},
	}
	for _, format := range []openai.AudioResponseFormat{openai.AudioResponseFormatText, openai.AudioResponseFormatSRT, openai.AudioResponseFormatVTT} {
		t.Run(string(format), func(t *testing.T) {
			var text string
			var raw *http.Response
			err := c.Post(ctx, "audio/transcriptions", params(format), &text, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			w := want[format]
			if text != w.body || raw.Header.Get("Content-Type") != w.ct {
				t.Fatalf("%s answered %q (%s), want %q", format, text, raw.Header.Get("Content-Type"), w.body)
			}
			// the upstream is asked for a format that says how long the audio was
			last := s.openai.Requests()[len(s.openai.Requests())-1]
			if last.Body["response_format"] != w.upstream || last.Files[0].SHA256 != sha(audio) {
				t.Fatalf("upstream got %v", last.Body)
			}
			u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)
		})
	}

	t.Run("no duration reported: the reservation's estimate is charged", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.NoAudioUsage = true })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.NoAudioUsage = false })
		if _, err := c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON)); err != nil {
			t.Fatal(err)
		}
		// 512 KiB at 16 kbit/s is 262 seconds
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, 262*100)
		if rows := s.gw.WaitUsage("artist", u.rows); !rows[u.rows-1].Estimated {
			t.Fatal("the row does not say its charge is estimated")
		}
	})

	t.Run("missing file part, wrong content type, wrong family", func(t *testing.T) {
		body, ct := form(t, map[string]string{"model": "whisper-1"}, nil)
		resp, out := s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, body, http.Header{"Content-Type": {ct}})
		if resp.StatusCode != 400 || !strings.Contains(string(out), "'file'") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/audio/transcriptions", "", 400, 0)
		resp, out = s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, []byte(`{"model":"whisper-1"}`), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(out), "multipart/form-data") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 400, 0) // a refusal whose model is known is counted under it
		_, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "imagen-4.0-generate-001", Input: "hi", Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "no speech endpoint") || !strings.Contains(e.Message, "imagen-4.0-generate-001") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/audio/speech", "imagen-4.0-generate-001", 400, 0)
	})

	t.Run("speech bytes arrive intact with the upstream's content type", func(t *testing.T) {
		for _, format := range []openai.AudioSpeechNewParamsResponseFormat{"", openai.AudioSpeechNewParamsResponseFormatOpus} {
			input := "The quick brown fox jumps over the lazy dog, " + string(format) + " édition."
			resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: input,
				Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, ResponseFormat: format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if wantAudio := gatewaytest.FakeSpeech(input, string(format)); !bytes.Equal(got, wantAudio) {
				t.Fatalf("%d bytes arrived, want the upstream's %d", len(got), len(wantAudio))
			}
			if ct := resp.Header.Get("Content-Type"); ct != gatewaytest.SpeechContentType(string(format)) {
				t.Fatalf("content type %q", ct)
			}
			// 15 USD per million characters
			u.expect("/v1/audio/speech", "tts-1", 200, perMillion(int64(len([]rune(input))), 15_000_000))
		}
	})

	t.Run("speech that breaks off mid-answer", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechBreakAfter = 100 << 10 })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechBreakAfter = 0 })
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: "broken",
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a cut answer ended cleanly")
		}
		// the upstream spoke, and is billed
		u.expect("/v1/audio/speech", "tts-1", 502, perMillion(6, 15_000_000))
	})
	u.balance()
}

// TestMediaUploadMemory uploads 20 MiB and then 200 MiB through the
// gateway: its peak resident memory must not grow with the upload, which
// is spooled to disk and streamed on, never held.
func TestMediaUploadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 220 MiB")
	}
	s := startMedia(t, "300MB")
	upload := func(size int64) {
		t.Helper()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		h := sha256.New()
		go func() {
			mw.WriteField("model", "whisper-1")
			w, _ := mw.CreateFormFile("file", "long.wav")
			src := rand.New(rand.NewSource(size))
			buf := make([]byte, 256<<10)
			for left := size; left > 0; left -= int64(len(buf)) {
				chunk := buf[:min(int64(len(buf)), left)]
				src.Read(chunk)
				h.Write(chunk)
				if _, err := w.Write(chunk); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(mw.Close())
		}()
		req, _ := http.NewRequest(http.MethodPost, s.gw.URL+"/v1/audio/transcriptions", pr)
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), gatewaytest.FakeTranscriptText()) {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		last := s.openai.Requests()[len(s.openai.Requests())-1]
		if len(last.Files) != 1 || last.Files[0].Size != size || last.Files[0].SHA256 != hex.EncodeToString(h.Sum(nil)) {
			t.Fatalf("upstream got %+v, want %d bytes", last.Files, size)
		}
	}
	upload(20 << 20)
	small := s.gw.PeakRSS()
	upload(200 << 20)
	large := s.gw.PeakRSS()
	t.Logf("peak RSS after 20 MiB: %d MiB, after 200 MiB: %d MiB", small>>20, large>>20)
	// holding the upload would add 180 MiB; a fixed margin allows for
	// buffers and the runtime
	if grew := large - small; grew > 48<<20 {
		t.Fatalf("peak RSS grew by %d MiB for a 180 MiB larger upload", grew>>20)
	}
}

// mediaFailoverConfig has two OpenAI channels for whisper-1 and tts-1,
// the first preferred, the second with a short timeout.
func mediaFailoverConfig() *caddyfile {
	return gatewayConfig().
		channel("first", "openai", "{{UP1}}", "sk-media-first", "whisper-1", "priority 10").
		channel("second", "openai", "{{UP2}}", "sk-media-second", "whisper-1 tts-1", "timeout 1s").
		price("whisper-1", "audio_second 0.0001").
		price("tts-1", "characters 15")
}

// TestMediaUploadFailover: a spooled upload is re-sent, byte for byte, to
// the next channel when the first fails, and billed once; speech from an
// upstream that goes silent is cut at the channel's timeout.
func TestMediaUploadFailover(t *testing.T) {
	first, second := gatewaytest.NewFakeOpenAI(t, "sk-media-first"), gatewaytest.NewFakeOpenAI(t, "sk-media-second")
	gw := gatewaytest.Start(t, mediaFailoverConfig().String(), gatewaytest.Vars{"UP1": first.URL, "UP2": second.URL})
	s := &mediaSetup{gw: gw, openai: second, key: gw.AddUser("artist", mediaQuota)}
	c := s.client()
	u := &usageCheck{t: t, s: s}
	ctx := context.Background()

	first.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 503 })
	audio := randomBytes(9, 3<<20)
	res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{Model: "whisper-1", File: openai.File(bytes.NewReader(audio), "a.ogg", "audio/ogg")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != gatewaytest.FakeTranscriptText() {
		t.Fatalf("answer %+v", res)
	}
	tried, got := first.Requests(), second.Requests()
	if len(tried) != 1 || len(got) != 1 || len(got[0].Files) != 1 || got[0].Files[0].SHA256 != sha(audio) || got[0].Files[0].ContentType != "audio/ogg" {
		t.Fatalf("first tried %d, second got %+v", len(tried), got)
	}
	u.expect("/v1/audio/transcriptions", "whisper-1", 200, 725)

	second.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechHangAfter = 64 << 10 })
	resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: "silence",
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(b) != 64<<10 {
		t.Fatalf("read %d bytes, err %v: want the bytes sent, then an error", len(b), err)
	}
	u.expect("/v1/audio/speech", "tts-1", 502, perMillion(7, 15_000_000))
	if rows := gw.WaitUsage("artist", u.rows); !strings.Contains(rows[u.rows-1].Error, "timeout") {
		t.Fatalf("row error %q", rows[u.rows-1].Error)
	}
	u.balance()
}

// TestMediaUploadsInFlightBounded: the disk uploads take at once is
// bounded (max_inflight_uploads); past it an upload gets a 503 with
// Retry-After, and the space is given back when an upload ends.
func TestMediaUploadsInFlightBounded(t *testing.T) {
	s := startMedia(t, "2MB", "max_inflight_uploads 3MB")
	// an upload that says it is 1.9 MB and stalls after its first bytes
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=stall\r\nContent-Length: 1900000\r\n\r\n"+
		"--stall\r\nContent-Disposition: form-data; name=\"file\"; filename=\"stalled.wav\"\r\n\r\n", strings.TrimPrefix(s.gw.URL, "http://"), s.key)
	conn.Write(randomBytes(11, 64<<10))
	body, ct := form(t, map[string]string{"model": "whisper-1"}, map[string][]byte{"file": randomBytes(10, 3<<19)})
	// the stalled upload holds its 1.9 MB of the 3 MB
	eventually(t, "the stalled upload to hold its space", func() bool {
		resp, out := s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, body, http.Header{"Content-Type": {ct}})
		return resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" && strings.Contains(string(out), "too many uploads")
	})
	conn.Close()
	// the space is back
	eventually(t, "the space to come back", func() bool {
		resp, _ := s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, body, http.Header{"Content-Type": {ct}})
		return resp.StatusCode == 200
	})
}
