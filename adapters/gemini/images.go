package gemini

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Image generations and edits behind OpenAI's images shape: Imagen models
// generate through models/{model}:predict (instances and parameters in,
// predictions with bytesBase64Encoded out), other models generate and edit
// through generateContent with image output (responseModalities TEXT and
// IMAGE; the images to edit as inlineData parts in, inlineData parts out).
// Both answer with the image bytes inline, so a client asking for URLs is
// refused.

// imagen reports whether a model is served by :predict.
func imagen(model string) bool { return strings.HasPrefix(model, "imagen-") }

// Imagen's aspect ratios, and those of Gemini's image output.
var (
	imagenRatios = []string{"1:1", "3:4", "4:3", "9:16", "16:9"}
	geminiRatios = []string{"1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"}
)

// aspectRatio turns an OpenAI size ("1536x1024") into the nearest ratio of
// the list; "" for a size left to the model.
func aspectRatio(size string, ratios []string) (string, error) {
	if size == "" || size == "auto" {
		return "", nil
	}
	w, h, ok := strings.Cut(size, "x")
	wi, err1 := strconv.Atoi(w)
	hi, err2 := strconv.Atoi(h)
	if !ok || err1 != nil || err2 != nil || wi <= 0 || hi <= 0 {
		return "", adapters.BadRequest("'size' must be WIDTHxHEIGHT such as 1024x1024, or auto, not %q", size)
	}
	want := math.Log(float64(wi) / float64(hi))
	best, dist := "", math.Inf(1)
	for _, r := range ratios {
		a, b, _ := strings.Cut(r, ":")
		ai, _ := strconv.Atoi(a)
		bi, _ := strconv.Atoi(b)
		if d := math.Abs(math.Log(float64(ai)/float64(bi)) - want); d < dist {
			best, dist = r, d
		}
	}
	return best, nil
}

// Imagen's :predict request and answer.
type predictRequest struct {
	Instances  []predictInstance `json:"instances"`
	Parameters predictParameters `json:"parameters"`
}

type predictInstance struct {
	Prompt string `json:"prompt"`
}

type predictParameters struct {
	SampleCount int64  `json:"sampleCount"`
	AspectRatio string `json:"aspectRatio,omitempty"`
}

type predictResponse struct {
	Predictions []struct {
		BytesBase64Encoded string `json:"bytesBase64Encoded"`
		MimeType           string `json:"mimeType"`
		RAIFilteredReason  string `json:"raiFilteredReason"`
	} `json:"predictions"`
}

// imageGenerateRequest asks generateContent for images.
type imageGenerateRequest struct {
	Contents         []content             `json:"contents"`
	GenerationConfig imageGenerationConfig `json:"generationConfig"`
}

type imageGenerationConfig struct {
	ResponseModalities []string     `json:"responseModalities"`
	CandidateCount     int64        `json:"candidateCount,omitempty"`
	ImageConfig        *imageConfig `json:"imageConfig,omitempty"`
}

type imageConfig struct {
	AspectRatio string `json:"aspectRatio,omitempty"`
}

// ServesMedia implements adapters.MediaProvider: image generations, and
// edits (which Imagen models refuse with a 400: they edit only on Vertex
// AI).
func (Adapter) ServesMedia(req *adapters.Request) bool {
	return req.Op == adapters.OpImage && req.Media != nil
}

// newImageRequest builds an image generation for an Imagen or a Gemini
// image model.
func newImageRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	m := req.Media
	if req.Op != adapters.OpImage {
		return nil, adapters.Unsupported("channel %q (gemini) serves image generations and edits only, not %s", up.Channel, req.Op)
	}
	if m.ResponseFormat == "url" {
		return nil, adapters.BadRequest("the model %s answers with image bytes, not URLs: ask for response_format \"b64_json\" (or leave it unset)", req.Model)
	}
	model := strings.TrimPrefix(up.Model, "models/")
	if m.Edit {
		return newImageEditRequest(ctx, up, req, model)
	}
	var body any
	method := "generateContent"
	if imagen(model) {
		ratio, err := aspectRatio(m.Size, imagenRatios)
		if err != nil {
			return nil, err
		}
		method = "predict"
		body = predictRequest{Instances: []predictInstance{{Prompt: m.Prompt}}, Parameters: predictParameters{SampleCount: m.N, AspectRatio: ratio}}
	} else {
		ratio, err := aspectRatio(m.Size, geminiRatios)
		if err != nil {
			return nil, err
		}
		prompt := m.Prompt
		g := imageGenerateRequest{
			Contents:         []content{{Role: "user", Parts: []part{{Text: &prompt}}}},
			GenerationConfig: imageGenerationConfig{ResponseModalities: []string{"TEXT", "IMAGE"}},
		}
		if m.N > 1 {
			g.GenerationConfig.CandidateCount = m.N
		}
		if ratio != "" {
			g.GenerationConfig.ImageConfig = &imageConfig{AspectRatio: ratio}
		}
		body = g
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	u := strings.TrimRight(up.BaseURL, "/") + "/v1beta/models/" + url.PathEscape(model) + ":" + method
	hr, err := adapters.NewJSONRequest(ctx, u, b, false)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("x-goog-api-key", up.Key)
	}
	return hr, nil
}

// newImageEditRequest sends an edit to a Gemini image model: the prompt
// and the images as inlineData parts of one user turn, streamed from the
// gateway's spool through a pipe and base64-encoded on the way, never
// held whole. Gemini takes no mask.
func newImageEditRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request, model string) (*http.Request, error) {
	m := req.Media
	if imagen(model) {
		return nil, adapters.Unsupported("the model %s cannot edit images on the Gemini API (Imagen edits only on Vertex AI): use a Gemini image model", req.Model)
	}
	if len(m.Form.Files("mask")) > 0 {
		return nil, adapters.BadRequest("the model %s takes no mask: leave it out and describe the region to change in the prompt", req.Model)
	}
	ratio, err := aspectRatio(m.Size, geminiRatios)
	if err != nil {
		return nil, err
	}
	config := imageGenerationConfig{ResponseModalities: []string{"TEXT", "IMAGE"}}
	if m.N > 1 {
		config.CandidateCount = m.N
	}
	if ratio != "" {
		config.ImageConfig = &imageConfig{AspectRatio: ratio}
	}
	prompt, _ := json.Marshal(m.Prompt)
	tail, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	images := m.Form.Files("image", "image[]")
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeEditBody(pw, prompt, images, tail))
	}()
	u := strings.TrimRight(up.BaseURL, "/") + "/v1beta/models/" + url.PathEscape(model) + ":generateContent"
	hr, err := adapters.NewBodyRequest(ctx, u, "application/json", pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("x-goog-api-key", up.Key)
	}
	return hr, nil
}

// writeEditBody writes a generateContent body whose image parts are
// encoded from the spooled files as they are read.
func writeEditBody(w io.Writer, prompt []byte, images []*adapters.FormFile, config []byte) error {
	parts := [][]byte{[]byte(`{"contents":[{"role":"user","parts":[{"text":`), prompt, []byte(`}`)}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	for _, im := range images {
		f, err := im.Open()
		if err != nil {
			return err
		}
		br := bufio.NewReader(f)
		mime := im.ContentType
		if !strings.HasPrefix(mime, "image/") {
			head, _ := br.Peek(512)
			mime = http.DetectContentType(head)
		}
		mt, _ := json.Marshal(mime)
		if _, err := fmt.Fprintf(w, `,{"inlineData":{"mimeType":%s,"data":"`, mt); err != nil {
			f.Close()
			return err
		}
		enc := base64.NewEncoder(base64.StdEncoding, w)
		_, err = io.Copy(enc, br)
		f.Close()
		if err == nil {
			err = enc.Close()
		}
		if err == nil {
			_, err = io.WriteString(w, `"}}`)
		}
		if err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, `]}],"generationConfig":%s}`, config); err != nil {
		return err
	}
	return nil
}

// imageAnswer is either answer: :predict's predictions, or
// generateContent's candidates with inlineData parts.
type imageAnswer struct {
	predictResponse
	generateResponse
}

// DecodeMediaResponse implements adapters.MediaProvider: the images of a
// :predict or generateContent answer, inline, and generateContent's usage.
func (Adapter) DecodeMediaResponse(req *adapters.Request, body []byte) (*adapters.MediaResponse, error) {
	var w imageAnswer
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.MediaResponse{Created: time.Now().Unix(), Usage: usageFromWire(w.UsageMetadata)}
	for _, p := range w.Predictions {
		// a prediction the safety filter removed has a reason, no bytes
		if p.BytesBase64Encoded != "" {
			resp.Images = append(resp.Images, adapters.GeneratedImage{B64: p.BytesBase64Encoded, MimeType: p.MimeType})
		}
	}
	for _, c := range w.Candidates {
		if c.Content == nil {
			continue
		}
		for _, p := range c.Content.Parts {
			if p.InlineData != nil && strings.HasPrefix(p.InlineData.MimeType, "image/") {
				resp.Images = append(resp.Images, adapters.GeneratedImage{B64: p.InlineData.Data, MimeType: p.InlineData.MimeType})
			}
		}
	}
	resp.Media.Images = int64(len(resp.Images))
	return resp, nil
}

var _ adapters.MediaProvider = Adapter{}
