package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// --- OpenAI's video API ---

// soraModels, soraSeconds and soraSizes are what OpenAI's video API
// reference allows.
var (
	soraModels  = []string{"sora-2", "sora-2-pro"}
	soraSeconds = []string{"4", "8", "12"}
	soraSizes   = []string{"720x1280", "1280x720", "1024x1792", "1792x1024"}
)

// serveSora answers /v1/videos... as OpenAI does.
func (v *JobStore) serveSora(w http.ResponseWriter, r *http.Request, key string) {
	if r.Header.Get("Authorization") != "Bearer "+key {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/videos"), "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		v.soraCreate(w, r)
	case rest != "" && r.Method == http.MethodGet:
		id, content := strings.CutSuffix(rest, "/content")
		if content {
			j, ok := v.download(id)
			if !ok {
				writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Video with id '"+id+"' not found.")
				return
			}
			if j.State != JobSucceeded {
				writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Video is not ready yet, use GET /v1/videos/{video_id} to check status.")
				return
			}
			w.Header().Set("Content-Type", "video/mp4")
			w.Header().Set("Content-Length", strconv.Itoa(len(VideoBytes(id))))
			_, _ = w.Write(VideoBytes(id))
			return
		}
		if !v.pollGate(w, r, soraServerError) {
			return
		}
		j, ok := v.polled(id)
		if !ok {
			writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Video with id '"+id+"' not found.")
			return
		}
		writeJSON(w, soraObject(j))
	default:
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func (v *JobStore) soraCreate(w http.ResponseWriter, r *http.Request) {
	if v.submitGate(w, r, soraServerError) {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Invalid Content-Type header, expected multipart/form-data.")
		return
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, 64<<20), params["boundary"])
	j := &Job{ID: fmt.Sprintf("video_%d", fakeRequestIDs.Add(1)), Params: map[string]any{}}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Could not parse multipart form.")
			return
		}
		b, _ := io.ReadAll(p)
		switch name := p.FormName(); name {
		case "model":
			j.Model = string(b)
		case "prompt":
			j.Prompt = string(b)
		case "input_reference":
			j.Image, j.ImageType = b, p.Header.Get("Content-Type")
		case "seconds", "size":
			j.Params[name] = string(b)
		default:
			writeSoraParamError(w, "Unknown parameter: '"+name+"'.", name, "unknown_parameter")
			return
		}
	}
	switch {
	case j.Prompt == "":
		writeSoraParamError(w, "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")
		return
	case j.Model != "" && !slices.Contains(soraModels, j.Model):
		writeSoraParamError(w, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'sora-2' and 'sora-2-pro'.", j.Model), "model", "invalid_value")
		return
	case j.Params["seconds"] != nil && !slices.Contains(soraSeconds, j.Params["seconds"].(string)):
		writeSoraParamError(w, fmt.Sprintf("Invalid value: '%s'. Supported values are: '4', '8', and '12'.", j.Params["seconds"]), "seconds", "invalid_value")
		return
	case j.Params["size"] != nil && !slices.Contains(soraSizes, j.Params["size"].(string)):
		writeSoraParamError(w, fmt.Sprintf("Invalid value: '%s'. Supported values are: '720x1280', '1280x720', '1024x1792', and '1792x1024'.", j.Params["size"]), "size", "invalid_value")
		return
	}
	if j.Model == "" {
		j.Model = "sora-2"
	}
	if strings.Contains(strings.ToLower(j.Prompt), "forbidden") {
		writeSoraParamError(w, "Your request was blocked by our moderation system.", "prompt", "moderation_blocked")
		return
	}
	j.Seconds = 4
	if s, ok := j.Params["seconds"].(string); ok {
		j.Seconds, _ = strconv.ParseFloat(s, 64)
	}
	writeJSON(w, soraObject(v.add(j, nil)))
}

func soraServerError(w http.ResponseWriter, status int) {
	writeOpenAIError(w, status, "server_error", "The server had an error while processing your request.")
}

func writeSoraParamError(w http.ResponseWriter, msg, param, code string) {
	writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": param, "code": code}})
}

// soraObject is the job as OpenAI's video object.
func soraObject(j Job) map[string]any {
	status := map[string]string{JobQueued: "queued", JobRunning: "in_progress", JobSucceeded: "completed", JobFailed: "failed"}[j.State]
	seconds, _ := j.Params["seconds"].(string)
	if seconds == "" {
		seconds = "4"
	}
	if j.Seconds > 0 {
		seconds = strconv.FormatFloat(j.Seconds, 'f', -1, 64)
	}
	size, _ := j.Params["size"].(string)
	if size == "" {
		size = "720x1280"
	}
	o := map[string]any{"id": j.ID, "object": "video", "model": j.Model, "status": status,
		"progress": j.Progress, "created_at": 1761622232, "completed_at": nil, "expires_at": nil,
		"prompt": j.Prompt, "seconds": seconds, "size": size, "remixed_from_video_id": nil, "error": nil}
	if j.State == JobSucceeded {
		o["completed_at"], o["expires_at"] = 1761622332, 1761708732
	}
	if j.State == JobFailed {
		o["error"] = map[string]any{"code": "video_generation_failed", "message": j.Reason}
	}
	return o
}

// --- Veo on the Gemini API ---

// veoParameters are the parameters the Gemini API's Veo takes (seed and
// generateAudio are Vertex AI's only); others are refused as the API does.
var veoParameters = []string{"aspectRatio", "negativePrompt", "durationSeconds", "resolution",
	"personGeneration", "enhancePrompt", "sampleCount"}

// serveVeo answers predictLongRunning, operations and file downloads as
// the Gemini API does. It reports whether the path was Veo's.
func (v *JobStore) serveVeo(w http.ResponseWriter, r *http.Request, key string) bool {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1beta/models/") && strings.HasSuffix(p, ":predictLongRunning"):
	case strings.HasPrefix(p, "/v1beta/models/") && strings.Contains(p, "/operations/"):
	case strings.HasPrefix(p, "/v1beta/files/") && strings.HasSuffix(p, ":download"):
	case strings.HasPrefix(p, "/signed/"):
		// signed storage the download redirects to: the signature, not a
		// key, lets it in (a key sent along is counted, not needed)
		id := strings.TrimPrefix(p, "/signed/")
		if r.URL.Query().Get("sig") != "ok-"+id {
			w.WriteHeader(http.StatusForbidden)
			return true
		}
		if r.Header.Get("x-goog-api-key") != "" {
			v.storageKeyed()
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(VideoBytes(id))
		return true
	default:
		return false
	}
	if r.Header.Get("x-goog-api-key") != key {
		geminiError(w, 400, "API key not valid. Please pass a valid API key.")
		return true
	}
	switch {
	case strings.HasSuffix(p, ":predictLongRunning") && r.Method == http.MethodPost:
		v.veoCreate(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/models/"), ":predictLongRunning"))
	case strings.HasSuffix(p, ":download"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/files/"), ":download")
		j, ok := v.download(id)
		if !ok || j.State != JobSucceeded || r.URL.Query().Get("alt") != "media" {
			geminiError(w, 404, "File not found.")
			return true
		}
		http.Redirect(w, r, "/signed/"+id+"?sig=ok-"+url.QueryEscape(id), http.StatusFound)
	case r.Method == http.MethodGet:
		_, opID, _ := strings.Cut(p, "/operations/")
		if !v.pollGate(w, r, veoServerError) {
			return true
		}
		if j, ok := v.polled(opID); ok {
			writeJSON(w, veoOperation(j, "http://"+r.Host))
		} else {
			geminiError(w, 404, "Operation not found.")
		}
	default:
		geminiError(w, 404, "no such method")
	}
	return true
}

func (v *JobStore) veoCreate(w http.ResponseWriter, r *http.Request, model string) {
	if v.submitGate(w, r, veoServerError) {
		return
	}
	var body struct {
		Instances []struct {
			Prompt string `json:"prompt"`
			Image  *struct {
				BytesBase64Encoded []byte `json:"bytesBase64Encoded"`
				MimeType           string `json:"mimeType"`
			} `json:"image"`
		} `json:"instances"`
		Parameters map[string]any `json:"parameters"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err := json.Unmarshal(raw, &body); err != nil {
		geminiError(w, 400, "Invalid JSON payload received.")
		return
	}
	if !strings.HasPrefix(model, "veo-") {
		geminiError(w, 404, "models/"+model+" is not found for API version v1beta, or is not supported for predictLongRunning.")
		return
	}
	if len(body.Instances) != 1 || (body.Instances[0].Prompt == "" && body.Instances[0].Image == nil) {
		geminiError(w, 400, "A prompt or an image is required in instances[0].")
		return
	}
	for k := range body.Parameters {
		if !slices.Contains(veoParameters, k) {
			geminiError(w, 400, fmt.Sprintf("Invalid JSON payload received. Unknown name %q at 'parameters': Cannot find field.", k))
			return
		}
	}
	if ar, ok := body.Parameters["aspectRatio"]; ok && ar != "16:9" && ar != "9:16" {
		geminiError(w, 400, fmt.Sprintf("Aspect ratio %v is not supported; use 16:9 or 9:16.", ar))
		return
	}
	if d, ok := body.Parameters["durationSeconds"]; ok && d != 4.0 && d != 6.0 && d != 8.0 {
		geminiError(w, 400, fmt.Sprintf("The duration %v is out of range: supported durations are 4, 6 and 8 seconds.", d))
		return
	}
	inst := body.Instances[0]
	if strings.Contains(strings.ToLower(inst.Prompt), "forbidden") {
		geminiError(w, 400, "The prompt could not be submitted: it violates the usage guidelines.")
		return
	}
	j := &Job{ID: fmt.Sprintf("op%d", fakeRequestIDs.Add(1)), Model: model, Prompt: inst.Prompt, Params: body.Parameters}
	if inst.Image != nil {
		j.Image, j.ImageType = inst.Image.BytesBase64Encoded, inst.Image.MimeType
	}
	j.Seconds = 8
	if d, ok := body.Parameters["durationSeconds"].(float64); ok {
		j.Seconds = d
	}
	v.add(j, nil)
	writeJSON(w, map[string]any{"name": "models/" + model + "/operations/" + j.ID})
}

func veoServerError(w http.ResponseWriter, status int) {
	geminiError(w, status, "The service is currently unavailable.")
}

// veoOperation is the job as a Gemini API operation.
func veoOperation(j Job, base string) map[string]any {
	op := map[string]any{"name": "models/" + j.Model + "/operations/" + j.ID}
	switch j.State {
	case JobSucceeded:
		op["done"] = true
		op["response"] = map[string]any{
			"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": []any{
				map[string]any{"video": map[string]any{"uri": base + "/v1beta/files/" + j.ID + ":download?alt=media"}},
			}},
		}
	case JobFailed:
		op["done"] = true
		op["error"] = map[string]any{"code": 3, "message": j.Reason, "status": "INVALID_ARGUMENT"}
	}
	return op
}
