package gemini_test

import (
	"context"
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
	edit := imageRequest("", 1, "")
	edit.Media.Edit = true
	if g.ServesMedia(edit) || !g.ServesMedia(imageRequest("", 1, "")) {
		t.Error("gemini serves image generations, not edits")
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
