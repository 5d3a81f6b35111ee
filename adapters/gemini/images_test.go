package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

func imageRequest(size string, n int64, format string) *adapters.Request {
	return &adapters.Request{Op: adapters.OpImage, Dialect: "openai", Model: "img", Media: &adapters.MediaRequest{Prompt: "a fox", N: n, Size: size, ResponseFormat: format}}
}

func TestImageRequests(t *testing.T) {
	g := gemini.Adapter{}
	tests := []struct {
		model, size string
		n           int64
		url, body   string
	}{
		{"imagen-4.0-generate-001", "1792x1024", 2, "https://g.example/v1beta/models/imagen-4.0-generate-001:predict",
			`{"instances":[{"prompt":"a fox"}],"parameters":{"sampleCount":2,"aspectRatio":"16:9"}}`},
		{"imagen-4.0-generate-001", "auto", 1, "https://g.example/v1beta/models/imagen-4.0-generate-001:predict",
			`{"instances":[{"prompt":"a fox"}],"parameters":{"sampleCount":1}}`},
		// 3:2 is not Imagen's: the nearest it has
		{"imagen-4.0-generate-001", "1536x1024", 1, "https://g.example/v1beta/models/imagen-4.0-generate-001:predict",
			`{"instances":[{"prompt":"a fox"}],"parameters":{"sampleCount":1,"aspectRatio":"4:3"}}`},
		{"gemini-2.5-flash-image", "1536x1024", 1, "https://g.example/v1beta/models/gemini-2.5-flash-image:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"a fox"}]}],"generationConfig":{"responseModalities":["TEXT","IMAGE"],"imageConfig":{"aspectRatio":"3:2"}}}`},
	}
	for _, tt := range tests {
		hr, err := g.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://g.example", Key: "k", Model: tt.model}, imageRequest(tt.size, tt.n, ""))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(hr.Body)
		if hr.URL.String() != tt.url || string(b) != tt.body || hr.Header.Get("x-goog-api-key") != "k" {
			t.Errorf("%s %s: %s %s", tt.model, tt.size, hr.URL, b)
		}
	}
	for _, req := range []*adapters.Request{imageRequest("1024x1024", 1, "url"), imageRequest("big", 1, "")} {
		if _, err := g.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://g.example", Model: "imagen-4.0-generate-001"}, req); err == nil {
			t.Errorf("%+v was taken", req.Media)
		}
	}
	if !g.ServesMedia(imageRequest("", 1, "")) {
		t.Error("gemini serves image generations")
	}
	if g.ServesMedia(&adapters.Request{Op: adapters.OpSpeech, Media: &adapters.MediaRequest{}}) {
		t.Error("gemini does not serve speech")
	}
}

func TestImageAnswers(t *testing.T) {
	g := gemini.Adapter{}
	req := imageRequest("", 1, "")
	predict := `{"predictions":[{"mimeType":"image/png","bytesBase64Encoded":"AAA"},{"raiFilteredReason":"filtered"},{"mimeType":"image/png","bytesBase64Encoded":"BBB"}]}`
	resp, err := g.DecodeMediaResponse(req, []byte(predict))
	if err != nil || len(resp.Images) != 2 || resp.Images[1].B64 != "BBB" || resp.Media.Images != 2 || resp.Usage.Known() {
		t.Fatalf("%+v %v", resp, err)
	}
	content := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Here."},{"inlineData":{"mimeType":"image/png","data":"CCC"}}]},"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1290,"totalTokenCount":1299}}`
	resp, err = g.DecodeMediaResponse(req, []byte(content))
	if err != nil || len(resp.Images) != 1 || resp.Images[0].B64 != "CCC" || resp.Usage.PromptTokens != 9 || resp.Usage.CompletionTokens != 1290 {
		t.Fatalf("%+v %v", resp, err)
	}
	if _, err := g.DecodeMediaResponse(req, []byte(`not json`)); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Fatal(err)
	}
}

// An edit's images go inline, base64-encoded from the spool as the
// upstream reads the body; a mask and an Imagen model are refused.
func TestImageEditRequest(t *testing.T) {
	g := gemini.Adapter{}
	png, jpeg := []byte("\x89PNG\r\n\x1a\nfake image bytes"), bytes.Repeat([]byte{0xff, 0xd8, 0xff, 0xe0, 1, 2, 3}, 5000)
	file := func(name, ct string, data []byte) adapters.FormPart {
		return adapters.FormPart{Name: name, File: &adapters.FormFile{Filename: name, ContentType: ct, Size: int64(len(data)),
			Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
	}
	edit := func(parts ...adapters.FormPart) *adapters.Request {
		req := imageRequest("1024x1024", 1, "")
		req.Media.Edit, req.Media.Prompt, req.Media.Form = true, `a "fox" hat`, &adapters.Form{Parts: parts}
		return req
	}
	// the second image's content type is sniffed from its bytes
	hr, err := g.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://g.example", Key: "k", Model: "gemini-2.5-flash-image"},
		edit(file("image[]", "image/png", png), file("image[]", "application/octet-stream", jpeg)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text       string `json:"text"`
				InlineData struct {
					MimeType string `json:"mimeType"`
					Data     []byte `json:"data"`
				} `json:"inlineData"`
			} `json:"parts"`
		} `json:"contents"`
		GenerationConfig map[string]any `json:"generationConfig"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%v: %.300s", err, raw)
	}
	p := body.Contents[0].Parts
	if hr.URL.Path != "/v1beta/models/gemini-2.5-flash-image:generateContent" || len(p) != 3 || p[0].Text != `a "fox" hat` ||
		p[1].InlineData.MimeType != "image/png" || !bytes.Equal(p[1].InlineData.Data, png) ||
		p[2].InlineData.MimeType != "image/jpeg" || !bytes.Equal(p[2].InlineData.Data, jpeg) {
		t.Fatalf("body %.400s", raw)
	}
	if fmt.Sprint(body.GenerationConfig["responseModalities"]) != "[TEXT IMAGE]" {
		t.Fatalf("config %v", body.GenerationConfig)
	}
	for model, req := range map[string]*adapters.Request{
		"gemini-2.5-flash-image":  edit(file("image", "image/png", png), file("mask", "image/png", png)),
		"imagen-4.0-generate-001": edit(file("image", "image/png", png)),
	} {
		if _, err := g.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://g.example", Model: model}, req); err == nil {
			t.Errorf("%s: the edit was taken", model)
		}
	}
}
