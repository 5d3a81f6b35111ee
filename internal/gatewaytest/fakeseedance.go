package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FakeSeedance is the Ark video task API (Volcengine Ark, BytePlus
// ModelArk) as its reference describes it: POST
// /api/v3/contents/generations/tasks takes {model, content: [{type: text,
// text}, {type: image_url, image_url: {url}, role}], callback_url, ...},
// where the text may end in commands (--duration 5 --ratio 16:9
// --resolution 720p --seed 7), and answers {id}; GET .../tasks/{id} reads
// it, status queued, running, succeeded (content.video_url, duration) or
// failed (error {code, message}). The key is a Bearer token; a wrong one
// gets 401, a bad body 400, an unknown model 404, each as {"error": {code,
// message, param, type}}.
type FakeSeedance struct {
	*videoVendor
	Key string
}

// seedanceModels are the model ids the fake serves and what they take:
// "t2v" text only, "i2v" a first frame, "both".
var seedanceModels = map[string]string{
	"doubao-seedance-1-0-pro-250528": "both", "seedance-1-0-pro-250528": "both",
	"doubao-seedance-1-0-lite-t2v-250428": "t2v", "doubao-seedance-1-0-lite-i2v-250428": "i2v",
}

// NewFakeSeedance starts a fake Ark that expects key.
func NewFakeSeedance(t testing.TB, key string) *FakeSeedance {
	Secret(key)
	f := &FakeSeedance{Key: key}
	f.videoVendor = newVideoVendor(t, "cgt-2025", f.serve)
	return f
}

func arkError(w http.ResponseWriter, status int, code, msg, param string) {
	typ := map[int]string{400: "BadRequest", 401: "Unauthorized", 404: "NotFound"}[status]
	writeJSONStatus(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg, "param": param, "type": typ}})
}

// serverError answers a fault the test set, in the vendor's shape.
func (f *FakeSeedance) serverError(w http.ResponseWriter, status int) {
	arkError(w, status, "InternalServiceError", "the service encountered an unexpected internal error", "")
}

func (f *FakeSeedance) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		arkError(w, http.StatusUnauthorized, "AuthenticationError", "the API key in the request is missing or invalid", "")
		return
	}
	const tasks = "/api/v3/contents/generations/tasks"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == tasks:
		if !f.submitGate(w, r, f.serverError) {
			f.submit(w, r)
		}
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, tasks+"/"):
		if f.pollGate(w, r, f.serverError) {
			f.query(w, strings.TrimPrefix(r.URL.Path, tasks+"/"))
		}
	default:
		arkError(w, http.StatusNotFound, "NotFound", "the requested resource is not found", "")
	}
}

type arkContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Role string `json:"role"`
}

func (f *FakeSeedance) submit(w http.ResponseWriter, r *http.Request) {
	raw, body, ok := readJSONObject(r)
	bad := func(param, format string, args ...any) {
		arkError(w, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("the parameter `%s` specified in the request is not valid: ", param)+fmt.Sprintf(format, args...), param)
	}
	if !ok {
		bad("body", "not a JSON object")
		return
	}
	model, _, _ := stringField(body, "model")
	takes, known := seedanceModels[model]
	if !known {
		arkError(w, http.StatusNotFound, "InvalidEndpointOrModel.NotFound", fmt.Sprintf("The model or endpoint %s does not exist or you do not have access to it.", model), "model")
		return
	}
	var content []arkContent
	if json.Unmarshal(body["content"], &content) != nil || len(content) == 0 {
		bad("content", "content must be a non-empty list")
		return
	}
	var text string
	images := 0
	for _, c := range content {
		switch c.Type {
		case "text":
			text += c.Text
		case "image_url":
			if c.ImageURL == nil || !isImageRef(c.ImageURL.URL, true) {
				bad("content.image_url", "image_url.url must be an image URL or data:image/<format>;base64,<data>")
				return
			}
			if c.Role != "" && c.Role != "first_frame" && c.Role != "last_frame" && c.Role != "reference_image" {
				bad("content.role", "unknown role %q", c.Role)
				return
			}
			images++
		default:
			bad("content.type", "unknown content type %q", c.Type)
			return
		}
	}
	switch {
	case takes == "t2v" && images > 0:
		bad("content", "model %s does not support image input", model)
		return
	case takes == "i2v" && images == 0:
		bad("content", "model %s requires an image", model)
		return
	case text == "" && images == 0:
		bad("content", "a text prompt is required")
		return
	}
	seconds := 5.0
	for _, m := range strings.Split(text, " --")[1:] {
		name, value, _ := strings.Cut(strings.TrimSpace(m), " ")
		switch name {
		case "duration", "dur":
			n, err := strconv.Atoi(value)
			if err != nil || n < 2 || n > 12 {
				bad("duration", "%q is not a whole number of seconds from 2 to 12", value)
				return
			}
			seconds = float64(n)
		case "ratio", "rt":
			if !strings.Contains("16:9 4:3 1:1 3:4 9:16 21:9 adaptive keep_ratio", value) || value == "" {
				bad("ratio", "%q is not a supported ratio", value)
				return
			}
		case "resolution", "rs":
			if value != "480p" && value != "720p" && value != "1080p" {
				bad("resolution", "%q is not 480p, 720p or 1080p", value)
				return
			}
		case "seed":
			if _, err := strconv.ParseInt(value, 10, 64); err != nil {
				bad("seed", "%q is not an integer", value)
				return
			}
		}
	}
	if _, _, ok := stringField(body, "callback_url"); !ok {
		bad("callback_url", "must be a string")
		return
	}
	j := f.accept(r.URL.Path, raw, seconds)
	writeJSONStatus(w, http.StatusOK, map[string]any{"id": j.ID})
}

func (f *FakeSeedance) query(w http.ResponseWriter, id string) {
	j, ok := f.polled(id)
	if !ok {
		arkError(w, http.StatusNotFound, "ResourceNotFound", fmt.Sprintf("the task %s is not found", id), "id")
		return
	}
	var model string
	var body map[string]json.RawMessage
	_ = json.Unmarshal(j.Body, &body)
	_ = json.Unmarshal(body["model"], &model)
	now := time.Now().Unix()
	answer := map[string]any{"id": j.ID, "model": model, "error": nil, "created_at": now, "updated_at": now}
	switch j.State {
	case JobQueued:
		answer["status"] = "queued"
	case JobRunning:
		answer["status"] = "running"
	case JobSucceeded:
		answer["status"] = "succeeded"
		answer["content"] = map[string]any{"video_url": j.VideoURL}
		answer["seed"], answer["resolution"], answer["ratio"] = 10, "720p", "16:9"
		answer["duration"], answer["framespersecond"] = int(j.Seconds), 24
		tokens := int(j.Seconds) * 21780
		answer["usage"] = map[string]any{"completion_tokens": tokens, "total_tokens": tokens}
	case JobFailed:
		answer["status"] = "failed"
		answer["error"] = map[string]any{"code": "OutputVideoSensitiveContentDetected", "message": j.Reason}
	}
	writeJSONStatus(w, http.StatusOK, answer)
}
