package openai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

func TestImageGenerationDecode(t *testing.T) {
	oai := openai.Adapter{}
	req, err := oai.DecodeRequest(adapters.OpImage, []byte(`{"model":"dall-e-3","prompt":"a cat"}`), post("/v1/images/generations"))
	if err != nil {
		t.Fatal(err)
	}
	// dall-e-3's own defaults, so the request is billed at what it gets
	if m := req.Media; req.Model != "dall-e-3" || m.N != 1 || m.Size != "1024x1024" || m.Quality != "standard" || m.Edit {
		t.Fatalf("%+v %+v", req, req.Media)
	}
	req, err = oai.DecodeRequest(adapters.OpImage, []byte(`{"model":"gpt-image-1","prompt":"a cat","n":3,"quality":"high"}`), post("/v1/images/generations"))
	if err != nil {
		t.Fatal(err)
	}
	if m := req.Media; m.N != 3 || m.Size != "" || m.Quality != "high" {
		t.Fatalf("%+v", req.Media)
	}
	for body, want := range map[string]string{
		`{"model":"dall-e-3"}`:                                      "'prompt' is required",
		`{"model":"dall-e-3","prompt":"x","n":0}`:                   "'n' must be between 1 and 10",
		`{"model":"dall-e-3","prompt":"x","n":11}`:                  "'n' must be between 1 and 10",
		`{"model":"dall-e-3","prompt":"x","response_format":"png"}`: "'response_format'",
		`{"prompt":"x"}`:                                            "'model' is required",
	} {
		_, err := oai.DecodeRequest(adapters.OpImage, []byte(body), post("/v1/images/generations"))
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	for body, want := range map[string]string{
		`{"model":"tts-1","voice":"alloy"}`: "'input' is required",
		`{"model":"tts-1","input":"hi"}`:    "'voice' is required",
	} {
		_, err := oai.DecodeRequest(adapters.OpSpeech, []byte(body), post("/v1/audio/speech"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	// an edit or a transcription sent as JSON names the content type it needs
	r := post("/v1/images/edits", "Content-Type", "application/json")
	if _, err := oai.DecodeRequest(adapters.OpImage, []byte(`{"model":"gpt-image-1","prompt":"x"}`), r); err == nil || !strings.Contains(err.Error(), "multipart/form-data") {
		t.Errorf("edit as JSON: %v", err)
	}
}

// spooled is a form as the relay spools it, with files in memory.
func spooled(parts ...adapters.FormPart) *adapters.Form { return &adapters.Form{Parts: parts} }

func field(name, v string) adapters.FormPart { return adapters.FormPart{Name: name, Value: v} }

func file(name, filename string, data []byte) adapters.FormPart {
	return adapters.FormPart{Name: name, File: &adapters.FormFile{Filename: filename, ContentType: "image/png", Size: int64(len(data)),
		Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}}
}

func TestDecodeUpload(t *testing.T) {
	oai := openai.Adapter{}
	img := []byte("\x89PNG fake")
	tests := []struct {
		path string
		op   adapters.Operation
		form *adapters.Form
		want string // "" accepted
	}{
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), field("model", "gpt-image-1"), field("prompt", "x")), ""},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image[]", "a.png", img), file("image[]", "b.png", img), file("mask", "m.png", img), field("model", "gpt-image-1"), field("prompt", "x")), ""},
		{"/v1/images/edits", adapters.OpImage, spooled(field("model", "gpt-image-1"), field("prompt", "x")), "has no image"},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), field("image", "x"), field("model", "gpt-image-1"), field("prompt", "x")), "must be a file part"},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), file("mask", "m.png", img), file("mask", "n.png", img), field("model", "gpt-image-1"), field("prompt", "x")), "2 masks"},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), field("model", "gpt-image-1")), "'prompt' is required"},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), field("prompt", "x")), "'model' is required"},
		{"/v1/images/edits", adapters.OpImage, spooled(file("image", "a.png", img), field("model", "gpt-image-1"), field("prompt", "x"), field("n", "two")), "'n' must be an integer"},
		{"/v1/images/generations", adapters.OpImage, spooled(field("model", "dall-e-3"), field("prompt", "x")), "takes a JSON body"},
		{"/v1/audio/transcriptions", adapters.OpTranscription, spooled(file("file", "a.mp3", img), field("model", "whisper-1")), ""},
		{"/v1/audio/transcriptions", adapters.OpTranscription, spooled(field("model", "whisper-1")), "has no audio"},
		{"/v1/audio/transcriptions", adapters.OpTranscription, spooled(field("file", "x"), field("model", "whisper-1")), "must be a file part"},
		{"/v1/audio/transcriptions", adapters.OpTranscription, spooled(file("file", "a.mp3", img), field("model", "whisper-1"), field("response_format", "mp3")), "'response_format'"},
		{"/v1/audio/transcriptions", adapters.OpTranscription, spooled(file("file", "a.mp3", img), field("model", "whisper-1"), field("stream", "true")), "streamed"},
	}
	for _, tt := range tests {
		req, err := oai.DecodeUpload(tt.op, tt.form, post(tt.path))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %v: %v", tt.path, tt.form.Parts, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.path, err, tt.want)
		case tt.want == "" && req.Media.Form != tt.form:
			t.Errorf("%s: the form is not kept", tt.path)
		}
	}
}

// An upload goes upstream part by part in the client's order, with the
// model replaced and the files' bytes intact; a transcription asked for
// as srt is asked of the upstream as verbose_json.
func TestUploadUpstreamBody(t *testing.T) {
	oai := openai.Adapter{}
	audio := bytes.Repeat([]byte("RIFF-audio"), 50_000)
	form := spooled(file("file", "talk \"1\".wav", audio), field("model", "whisper"), field("response_format", "srt"), field("language", "en"))
	req, err := oai.DecodeUpload(adapters.OpTranscription, form, post("/v1/audio/transcriptions"))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := oai.NewRequest(context.Background(), &adapters.Upstream{BaseURL: "https://up.example/", Key: "sk-up", Model: "whisper-1"}, req)
	if err != nil {
		t.Fatal(err)
	}
	if hr.URL.String() != "https://up.example/v1/audio/transcriptions" || hr.Header.Get("Authorization") != "Bearer sk-up" {
		t.Fatalf("%s %v", hr.URL, hr.Header)
	}
	_, params, err := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(hr.Body, params["boundary"])
	var got []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		if p.FileName() != "" {
			if !bytes.Equal(b, audio) || p.FileName() != `talk "1".wav` {
				t.Fatalf("file %q arrived as %d bytes", p.FileName(), len(b))
			}
			b = []byte("<file>")
		}
		got = append(got, p.FormName()+"="+string(b))
	}
	if want := "file=<file> model=whisper-1 response_format=verbose_json language=en"; strings.Join(got, " ") != want {
		t.Fatalf("upstream parts %v, want %s", got, want)
	}
}

// A transcription in text, srt or vtt is rendered from the json or
// verbose_json the upstream was asked for, and billed on its duration.
func TestTranscriptionFormats(t *testing.T) {
	oai := openai.Adapter{}
	verbose := []byte(`{"task":"transcribe","language":"english","duration":65.5,"text":"Hi there. Bye.","segments":[
		{"id":0,"start":0,"end":1.25,"text":" Hi there."},{"id":1,"start":61.5,"end":3725.005,"text":" Bye."}],
		"usage":{"type":"duration","seconds":66}}`)
	tests := []struct{ format, want, ct string }{
		{"srt", "1\n00:00:00,000 --> 00:00:01,250\nHi there.\n\n2\n00:01:01,500 --> 01:02:05,005\nBye.\n\n", "text/plain; charset=utf-8"},
		{"vtt", "WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nHi there.\n\n00:01:01.500 --> 01:02:05.005\nBye.\n\n", "text/vtt; charset=utf-8"},
		{"text", "Hi there. Bye.\n", "text/plain; charset=utf-8"},
		{"verbose_json", string(verbose), "application/json"},
	}
	for _, tt := range tests {
		req := &adapters.Request{Op: adapters.OpTranscription, Dialect: openai.Name, Media: &adapters.MediaRequest{ResponseFormat: tt.format}}
		resp, err := oai.DecodeMediaResponse(req, verbose)
		if err != nil {
			t.Fatal(err)
		}
		// usage.seconds is what OpenAI bills by
		if !resp.Media.AudioKnown || resp.Media.AudioMillis != 66_000 {
			t.Fatalf("audio %+v", resp.Media)
		}
		body, ct, err := oai.EncodeMediaResponse(req, resp)
		if err != nil || string(body) != tt.want || ct != tt.ct {
			t.Errorf("%s: %q %s %v, want %q", tt.format, body, ct, err, tt.want)
		}
	}
	// a model billed by tokens reports them
	req := &adapters.Request{Op: adapters.OpTranscription, Dialect: openai.Name, Media: &adapters.MediaRequest{}}
	resp, err := oai.DecodeMediaResponse(req, []byte(`{"text":"x","usage":{"type":"tokens","input_tokens":14,"output_tokens":45,"total_tokens":59}}`))
	if err != nil || resp.Usage.PromptTokens != 14 || resp.Usage.CompletionTokens != 45 || resp.Media.AudioKnown {
		t.Fatalf("%+v %v", resp, err)
	}
	if _, err := oai.DecodeMediaResponse(req, []byte(`{"error":"x"}`)); err == nil {
		t.Fatal("an answer without text was taken")
	}
}

func TestImagesAnswerForeignUpstream(t *testing.T) {
	oai := openai.Adapter{}
	req := &adapters.Request{Op: adapters.OpImage, Dialect: openai.Name, Media: &adapters.MediaRequest{}}
	body, ct, err := oai.EncodeMediaResponse(req, &adapters.MediaResponse{Created: 7, Images: []adapters.GeneratedImage{{B64: "AAA"}},
		Usage: adapters.Usage{PromptTokens: 9, CompletionTokens: 1290}})
	want := `{"created":7,"data":[{"b64_json":"AAA"}],"usage":{"input_tokens":9,"output_tokens":1290,"total_tokens":1299,"input_tokens_details":{"text_tokens":9,"image_tokens":0}}}`
	if err != nil || string(body) != want || ct != "application/json" {
		t.Fatalf("%s %s %v", body, ct, err)
	}
}

// The images meter reads what billing needs from an answer written to it
// in pieces of any size, and agrees with decoding the answer whole.
func TestImageMeter(t *testing.T) {
	oai := openai.Adapter{}
	req := &adapters.Request{Op: adapters.OpImage, Dialect: openai.Name, Media: &adapters.MediaRequest{}}
	answer := []byte(`{"created": 1713833628, "data": [{"b64_json": "iVBOR\"w0\\KGgo=", "revised_prompt": "a {cat} [x]"}, {"b64_json": "AAAA"},
		{"b64_json":"BBBB","nested":{"data":[{},{}]}}],
		"background":"opaque","output_format":"png","size":"1024x1536","quality":"high",
		"usage":{"input_tokens":50,"input_tokens_details":{"image_tokens":40,"text_tokens":10},"output_tokens":18720,"total_tokens":18770}}`)
	whole, err := oai.DecodeMediaResponse(req, answer)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Media.Images != 3 || whole.Media.Size != "1024x1536" || whole.Media.ImageInputTokens != 40 || whole.Usage.CompletionTokens != 18720 {
		t.Fatalf("decoded %+v", whole)
	}
	for _, piece := range []int{1, 2, 3, 7, 64, len(answer)} {
		m := oai.NewMediaMeter(req)
		for off := 0; off < len(answer); off += piece {
			m.Write(answer[off:min(off+piece, len(answer))])
		}
		got, err := m.Result()
		if err != nil {
			t.Fatalf("pieces of %d: %v", piece, err)
		}
		if got.Media != whole.Media || got.Usage != whole.Usage || got.Created != 1713833628 {
			t.Fatalf("pieces of %d: %+v %+v, want %+v %+v", piece, got.Media, got.Usage, whole.Media, whole.Usage)
		}
	}
	// an answer cut short says so, with what it counted
	m := oai.NewMediaMeter(req)
	m.Write(answer[:60])
	if got, err := m.Result(); err == nil || got.Media.Images != 1 {
		t.Fatalf("cut answer: %+v %v", got, err)
	}
	if oai.NewMediaMeter(&adapters.Request{Op: adapters.OpTranscription, Dialect: openai.Name}) != nil {
		t.Fatal("a transcription is decoded whole, to render its format")
	}
}
