package gatewaytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// The fakes' media endpoints, as OpenAI's and Google's API references
// describe them: OpenAI's images (generations JSON, edits multipart),
// speech (audio bytes with the format's content type) and transcriptions
// (multipart, answered in each response_format); Imagen's :predict and
// Gemini's image output through generateContent.

// MediaBehavior is how the fakes answer media requests.
type MediaBehavior struct {
	// AudioSeconds is how long the fake says transcribed audio is
	// (default FakeAudioSeconds).
	AudioSeconds float64
	// NoAudioUsage: transcriptions report neither usage nor duration.
	NoAudioUsage bool
	// SpeechBreakAfter: speech answers drop the connection after this
	// many bytes.
	SpeechBreakAfter int
	// SpeechHangAfter: speech answers stop sending after this many bytes
	// and hold the connection until the gateway hangs up.
	SpeechHangAfter int
	// ImagesBreakAfter: images answers drop the connection after this
	// many bytes.
	ImagesBreakAfter int
}

// UploadedFile is a file part a fake received, hashed as it streamed in.
type UploadedFile struct {
	Field, Filename, ContentType string
	Size                         int64
	SHA256                       string // hex
}

// FakeTranscript is what the fake hears in any audio, in two segments.
var FakeTranscript = []struct {
	Start, End float64
	Text       string
}{{0, 3.5, "Hello from the fake upstream."}, {3.5, 7.25, "This is a test."}}

// FakeAudioSeconds is the audio length the fake reports by default.
const FakeAudioSeconds = 7.25

// FakeTranscriptText is the transcript as one text.
func FakeTranscriptText() string {
	var parts []string
	for _, s := range FakeTranscript {
		parts = append(parts, s.Text)
	}
	return strings.Join(parts, " ")
}

// SpeechContentType is the content type OpenAI answers speech with.
func SpeechContentType(format string) string {
	switch format {
	case "opus":
		return "audio/opus"
	case "aac":
		return "audio/aac"
	case "flac":
		return "audio/flac"
	case "wav":
		return "audio/wav"
	case "pcm":
		return "audio/pcm"
	}
	return "audio/mpeg"
}

// FakeSpeech is the audio the fake speaks for an input: 4 KiB per
// character (at least 256 KiB), derived from the input and the format, so
// a test can tell each byte arrived intact.
func FakeSpeech(input, format string) []byte {
	n := max(len(input)*4<<10, 256<<10)
	out := make([]byte, 0, n+sha256.Size)
	seed := sha256.Sum256([]byte(format + "\x00" + input))
	for len(out) < n {
		out = append(out, seed[:]...)
		seed = sha256.Sum256(seed[:])
	}
	return out[:n]
}

// FakePNG is image i of a fake's answer: a valid 2x2 PNG whose colour
// depends on i.
func FakePNG(i int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for x := 0; x < 2; x++ {
		for y := 0; y < 2; y++ {
			img.Set(x, y, color.RGBA{uint8(40 * i), uint8(255 - 40*i), 128, 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

// gptImageOutputTokens are the output tokens gpt-image-1 reports per image
// by quality and size, as OpenAI's pricing tables give them.
var gptImageOutputTokens = map[string]int64{
	"low/1024x1024": 272, "low/1024x1536": 408, "low/1536x1024": 400,
	"medium/1024x1024": 1056, "medium/1024x1536": 1584, "medium/1536x1024": 1568,
	"high/1024x1024": 4160, "high/1024x1536": 6240, "high/1536x1024": 6208,
}

// FakeImageTextTokens and FakeImageInputTokens are the input tokens the
// fake reports for gpt-image-1: the prompt's, and each input image's.
const (
	FakeImageTextTokens  = 12
	FakeImageInputTokens = 323
)

// media answers OpenAI's media endpoints; false when the path is not one.
// Multipart bodies are read part by part, files hashed as they stream in,
// never held whole.
func (f *FakeOpenAI) media(w http.ResponseWriter, r *http.Request, route string) bool {
	switch route {
	case "/v1/images/edits", "/v1/audio/transcriptions":
	default:
		return false
	}
	reqID := fmt.Sprintf("req_fake_%d", fakeRequestIDs.Add(1))
	cfg, i := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), RequestID: reqID})
	w.Header().Set("X-Request-Id", reqID)
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return true
	}
	if cfg.FailStatus != 0 {
		writeOpenAIError(w, cfg.FailStatus, "server_error", "The server had an error while processing your request.")
		return true
	}
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Invalid Content-Type header ("+r.Header.Get("Content-Type")+"), expected multipart/form-data.")
		return true
	}
	rec := f.Requests()[i]
	rec.Body = map[string]any{}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Could not parse multipart form")
			return true
		}
		if p.FileName() == "" {
			v, _ := io.ReadAll(io.LimitReader(p, 1<<20))
			rec.Body[p.FormName()] = string(v)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, p)
		if err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Could not parse multipart form")
			return true
		}
		rec.Files = append(rec.Files, UploadedFile{Field: p.FormName(), Filename: p.FileName(), ContentType: p.Header.Get("Content-Type"), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	rec.Model, _ = rec.Body["model"].(string)
	f.update(i, &rec)
	if rec.Model == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter")
		return true
	}
	if route == "/v1/images/edits" {
		var images int
		for _, fl := range rec.Files {
			if fl.Field == "image" || fl.Field == "image[]" {
				images++
			}
		}
		if images == 0 {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'image'.")
			return true
		}
		f.images(w, &cfg, rec.Model, rec.Body, images)
		return true
	}
	f.transcription(w, &cfg, &rec)
	return true
}

// images answers a generation or an edit: dall-e models by URL unless
// b64_json is asked, gpt-image models always inline with token usage.
func (f *FakeOpenAI) images(w http.ResponseWriter, cfg *Behavior, model string, body map[string]any, inputImages int) {
	prompt, _ := body["prompt"].(string)
	if prompt == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'prompt'.")
		return
	}
	n := 1
	switch v := body["n"].(type) {
	case float64:
		n = int(v)
	case string:
		fmt.Sscan(v, &n)
	}
	if n < 1 || n > 10 || (model == "dall-e-3" && n != 1) {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("Invalid 'n': %d.", n))
		return
	}
	size, _ := body["size"].(string)
	quality, _ := body["quality"].(string)
	format, _ := body["response_format"].(string)
	gptImage := strings.HasPrefix(model, "gpt-image")
	resp := map[string]any{"created": time.Now().Unix()}
	var data []any
	for i := 0; i < n; i++ {
		img := map[string]any{}
		if gptImage || format == "b64_json" {
			img["b64_json"] = base64.StdEncoding.EncodeToString(FakePNG(i))
		} else {
			img["url"] = fmt.Sprintf("https://images.fake-openai.test/%d.png", i)
		}
		if model == "dall-e-3" {
			img["revised_prompt"] = "A revised " + prompt
		}
		data = append(data, img)
	}
	resp["data"] = data
	if gptImage {
		if size == "" || size == "auto" {
			size = "1024x1024"
		}
		if quality == "" || quality == "auto" {
			quality = "medium"
		}
		out, ok := gptImageOutputTokens[quality+"/"+size]
		if !ok {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("Invalid size '%s' or quality '%s'.", size, quality))
			return
		}
		in := int64(FakeImageTextTokens + inputImages*FakeImageInputTokens)
		resp["size"], resp["quality"], resp["background"], resp["output_format"] = size, quality, "opaque", "png"
		resp["usage"] = map[string]any{"input_tokens": in, "output_tokens": out * int64(n), "total_tokens": in + out*int64(n),
			"input_tokens_details": map[string]any{"text_tokens": FakeImageTextTokens, "image_tokens": inputImages * FakeImageInputTokens}}
	}
	if cut := cfg.Media.ImagesBreakAfter; cut > 0 {
		b, _ := json.Marshal(resp)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:min(cut, len(b))])
		w.(http.Flusher).Flush()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
	}
	writeJSON(w, resp)
}

// transcription answers in the response_format asked for.
func (f *FakeOpenAI) transcription(w http.ResponseWriter, cfg *Behavior, rec *Recorded) {
	var audio int
	for _, fl := range rec.Files {
		if fl.Field == "file" {
			audio++
		}
	}
	if audio != 1 {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'file'.")
		return
	}
	seconds := cfg.Media.AudioSeconds
	if seconds == 0 {
		seconds = FakeAudioSeconds
	}
	format, _ := rec.Body["response_format"].(string)
	usage := map[string]any{"type": "duration", "seconds": seconds}
	text := FakeTranscriptText()
	switch format {
	case "", "json":
		resp := map[string]any{"text": text}
		if !cfg.Media.NoAudioUsage {
			resp["usage"] = usage
		}
		writeJSON(w, resp)
	case "verbose_json":
		var segs []any
		for i, s := range FakeTranscript {
			segs = append(segs, map[string]any{"id": i, "seek": 0, "start": s.Start, "end": s.End, "text": " " + s.Text,
				"tokens": []int{50364 + i}, "temperature": 0.0, "avg_logprob": -0.2, "compression_ratio": 1.1, "no_speech_prob": 0.01})
		}
		resp := map[string]any{"task": "transcribe", "language": "english", "text": text, "segments": segs}
		if !cfg.Media.NoAudioUsage {
			resp["duration"], resp["usage"] = seconds, usage
		}
		writeJSON(w, resp)
	case "text", "srt", "vtt":
		// the gateway asks for json or verbose_json instead, to learn the
		// audio's length; these answers carry none
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, text+"\n")
	default:
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("Invalid value for 'response_format': %q.", format))
	}
}

// speech answers with FakeSpeech's bytes, a chunk at a time, as the real
// API streams its audio.
func (f *FakeOpenAI) speech(w http.ResponseWriter, r *http.Request, cfg *Behavior, body map[string]any) {
	input, _ := body["input"].(string)
	voice, _ := body["voice"].(string)
	if input == "" || voice == "" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'input' or 'voice'.")
		return
	}
	format, _ := body["response_format"].(string)
	audio := FakeSpeech(input, format)
	w.Header().Set("Content-Type", SpeechContentType(format))
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for off := 0; off < len(audio); off += 16 << 10 {
		end := min(off+16<<10, len(audio))
		if b := cfg.Media.SpeechHangAfter; b > 0 && end > b {
			w.Write(audio[off:b])
			fl.Flush()
			<-r.Context().Done()
			return
		}
		if b := cfg.Media.SpeechBreakAfter; b > 0 && end > b {
			w.Write(audio[off:b])
			fl.Flush()
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
			return
		}
		if _, err := w.Write(audio[off:end]); err != nil {
			return
		}
		fl.Flush()
	}
}

// geminiMedia answers Imagen's :predict and generateContent with image
// output; false for any other request.
func (f *FakeGemini) geminiMedia(w http.ResponseWriter, i int, model, method string, raw []byte) bool {
	if method == "predict" {
		var req struct {
			Instances []struct {
				Prompt string `json:"prompt"`
			} `json:"instances"`
			Parameters struct {
				SampleCount *int   `json:"sampleCount"`
				AspectRatio string `json:"aspectRatio"`
			} `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || len(req.Instances) != 1 || req.Instances[0].Prompt == "" {
			geminiError(w, 400, "Invalid request: instances[0].prompt is required.")
			return true
		}
		if !strings.HasPrefix(model, "imagen-") {
			geminiError(w, 404, fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for predict.", model))
			return true
		}
		n := 4 // Imagen's default sampleCount
		if req.Parameters.SampleCount != nil {
			n = *req.Parameters.SampleCount
		}
		if n < 1 || n > 4 {
			geminiError(w, 400, "sampleCount must be between 1 and 4.")
			return true
		}
		switch req.Parameters.AspectRatio {
		case "", "1:1", "3:4", "4:3", "9:16", "16:9":
		default:
			geminiError(w, 400, "Unsupported aspect ratio: "+req.Parameters.AspectRatio)
			return true
		}
		var preds []any
		for i := 0; i < n; i++ {
			preds = append(preds, map[string]any{"mimeType": "image/png", "bytesBase64Encoded": base64.StdEncoding.EncodeToString(FakePNG(i))})
		}
		writeJSONStatus(w, 200, map[string]any{"predictions": preds})
		return true
	}
	if method != "generateContent" {
		return false
	}
	var req struct {
		Contents []struct {
			Parts []struct {
				Text       string `json:"text"`
				InlineData *struct {
					MimeType string `json:"mimeType"`
					Data     string `json:"data"`
				} `json:"inlineData"`
			} `json:"parts"`
		} `json:"contents"`
		GenerationConfig struct {
			ResponseModalities []string `json:"responseModalities"`
			CandidateCount     int      `json:"candidateCount"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return false
	}
	wantsImage := false
	for _, m := range req.GenerationConfig.ResponseModalities {
		wantsImage = wantsImage || m == "IMAGE"
	}
	if !wantsImage {
		return false
	}
	if !strings.Contains(model, "image") {
		geminiError(w, 400, "Model does not support the requested response modalities: image,text")
		return true
	}
	// the images given to edit, hashed as the OpenAI fake hashes uploads
	rec := f.Requests()[i]
	rec.Model = model
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			rec.Prompt += p.Text
			if d := p.InlineData; d != nil {
				b, err := base64.StdEncoding.DecodeString(d.Data)
				if err != nil {
					geminiError(w, 400, "Invalid value at 'contents[0].parts[1].inline_data.data' (TYPE_BYTES), Base64 decoding failed.")
					return true
				}
				sum := sha256.Sum256(b)
				rec.Files = append(rec.Files, UploadedFile{Field: "inlineData", ContentType: d.MimeType, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
			}
		}
	}
	f.update(i, &rec)
	n := max(req.GenerationConfig.CandidateCount, 1)
	var cands []any
	for i := 0; i < n; i++ {
		parts := []any{map[string]any{"text": "Here is your image."}, map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(FakePNG(i))}}}
		cands = append(cands, map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": i})
	}
	usage := map[string]any{"promptTokenCount": 9, "candidatesTokenCount": 1290 * n, "totalTokenCount": 9 + 1290*n,
		"promptTokensDetails":     []any{map[string]any{"modality": "TEXT", "tokenCount": 9}},
		"candidatesTokensDetails": []any{map[string]any{"modality": "IMAGE", "tokenCount": 1290 * n}}}
	writeJSONStatus(w, 200, map[string]any{"candidates": cands, "usageMetadata": usage, "modelVersion": model, "responseId": "fake-image-1"})
	return true
}
