package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// maxImages is the most images one request may ask for (OpenAI's n).
const maxImages = 10

// imageDefaults are the size and quality OpenAI's image models use when a
// request names none, so that it is billed at the price of what it gets.
// A model not listed (gpt-image-1 and later decide for themselves) is
// billed at the dearest price its table allows until its answer says.
var imageDefaults = map[string][2]string{
	"dall-e-2": {"1024x1024", "standard"},
	"dall-e-3": {"1024x1024", "standard"},
}

// imageGenerationRequest is the part of POST /v1/images/generations the
// gateway reads; the body itself goes upstream as sent.
type imageGenerationRequest struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	N              *int64 `json:"n"`
	Size           string `json:"size"`
	Quality        string `json:"quality"`
	ResponseFormat string `json:"response_format"`
}

func decodeImageGeneration(req *adapters.Request, body []byte) error {
	var w imageGenerationRequest
	if err := adapters.DecodeJSON(body, &w); err != nil {
		return err
	}
	if strings.TrimSpace(w.Prompt) == "" {
		return adapters.BadRequest("'prompt' is required: describe the image to generate")
	}
	m, err := imageRequest(w.Model, w.Prompt, w.N, w.Size, w.Quality, w.ResponseFormat)
	if err != nil {
		return err
	}
	req.Model, req.Media = w.Model, m
	return nil
}

// decodeImageEdit reads an edit's form: one or more images ("image", or
// "image[]" as several SDKs name a list), an optional mask, a prompt.
func decodeImageEdit(req *adapters.Request, form *adapters.Form) error {
	if len(form.Files("image", "image[]")) == 0 {
		return adapters.BadRequest("the edit has no image: send the image to edit as a file part named 'image' (several as 'image[]')")
	}
	if masks := form.Files("mask"); len(masks) > 1 {
		return adapters.BadRequest("the edit has %d masks: send at most one file part named 'mask'", len(masks))
	}
	for _, p := range form.Parts {
		if p.File == nil && (p.Name == "image" || p.Name == "mask") {
			return adapters.BadRequest("'%s' must be a file part (with a filename), not a text field", p.Name)
		}
	}
	prompt, _ := form.Value("prompt")
	if strings.TrimSpace(prompt) == "" {
		return adapters.BadRequest("'prompt' is required: describe the edit to make")
	}
	model, _ := form.Value("model")
	n, err := formInt(form, "n")
	if err != nil {
		return err
	}
	size, _ := form.Value("size")
	quality, _ := form.Value("quality")
	format, _ := form.Value("response_format")
	m, err := imageRequest(model, prompt, n, size, quality, format)
	if err != nil {
		return err
	}
	m.Edit, m.Form = true, form
	req.Model, req.Media = model, m
	return nil
}

func imageRequest(model, prompt string, n *int64, size, quality, format string) (*adapters.MediaRequest, error) {
	m := &adapters.MediaRequest{Prompt: prompt, N: 1, Size: size, Quality: quality, ResponseFormat: format}
	if n != nil {
		if *n < 1 || *n > maxImages {
			return nil, adapters.BadRequest("'n' must be between 1 and %d, not %d", maxImages, *n)
		}
		m.N = *n
	}
	switch format {
	case "", "url", "b64_json":
	default:
		return nil, adapters.BadRequest("'response_format' must be \"url\" or \"b64_json\", not %q", format)
	}
	if d, ok := imageDefaults[model]; ok {
		if m.Size == "" {
			m.Size = d[0]
		}
		if m.Quality == "" {
			m.Quality = d[1]
		}
	}
	return m, nil
}

// imagesResponse is the part of an images answer the gateway reads to
// bill it: how many images, of what size and quality, and the tokens of a
// model billed by tokens.
type imagesResponse struct {
	Created int64 `json:"created"`
	// each image is skipped, not decoded
	Data    []struct{} `json:"data"`
	Size    string     `json:"size"`
	Quality string     `json:"quality"`
	Usage   *struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		InputTokensDetails struct {
			ImageTokens int64 `json:"image_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
}

func decodeImagesResponse(body []byte) (*adapters.MediaResponse, error) {
	var w imagesResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	resp := &adapters.MediaResponse{Created: w.Created, Raw: body, Dialect: Name, ContentType: "application/json"}
	resp.Media = adapters.MediaUsage{Images: int64(len(w.Data)), Size: w.Size, Quality: w.Quality}
	if u := w.Usage; u != nil {
		resp.Usage = adapters.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens}
		resp.Media.ImageInputTokens = u.InputTokensDetails.ImageTokens
	}
	return resp, nil
}

// imagesAnswer is OpenAI's images answer, written for an upstream of
// another family.
type imagesAnswer struct {
	Created int64             `json:"created"`
	Data    []imageAnswerData `json:"data"`
	Usage   *imagesUsage      `json:"usage,omitempty"`
}

type imageAnswerData struct {
	B64JSON       string `json:"b64_json,omitempty"`
	URL           string `json:"url,omitempty"`
	RevisedPrompt string `json:"revised_prompt,omitempty"`
}

type imagesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails struct {
		TextTokens  int64 `json:"text_tokens"`
		ImageTokens int64 `json:"image_tokens"`
	} `json:"input_tokens_details"`
}

func encodeImages(resp *adapters.MediaResponse) ([]byte, string, error) {
	if resp.Dialect == Name {
		return resp.Raw, "application/json", nil
	}
	out := imagesAnswer{Created: resp.Created, Data: make([]imageAnswerData, 0, len(resp.Images))}
	for _, im := range resp.Images {
		out.Data = append(out.Data, imageAnswerData{B64JSON: im.B64, URL: im.URL, RevisedPrompt: im.RevisedPrompt})
	}
	if u := resp.Usage; u.Known() {
		out.Usage = &imagesUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
		out.Usage.InputTokensDetails.ImageTokens = resp.Media.ImageInputTokens
		out.Usage.InputTokensDetails.TextTokens = u.PromptTokens - resp.Media.ImageInputTokens
	}
	b, err := json.Marshal(out)
	return b, "application/json", err
}
