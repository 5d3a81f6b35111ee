package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"math/rand"
	"mime/multipart"
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
