package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FakeMiniMax is MiniMax's video generation API as its reference
// describes it: POST /v1/video_generation takes {model, prompt,
// first_frame_image, duration, resolution, callback_url, ...} and answers
// {task_id, base_resp}; GET /v1/query/video_generation?task_id= reads the
// job, status Preparing, Queueing, Processing, Success (with file_id) or
// Fail; GET /v1/files/retrieve?file_id= resolves the file to
// file.download_url. Every answer is HTTP 200 with base_resp {status_code,
// status_msg}: 1004 for a wrong Bearer key, 2013 for bad parameters, 1026
// for a prompt it will not take. A failed job says why in its base_resp.
type FakeMiniMax struct {
	*videoVendor
	Key string
	// GroupID, when set, must come as GroupId with each file lookup.
	GroupID string
}

// minimaxModels are the models the fake serves; "I2V" ones need a first
// frame.
var minimaxModels = map[string]bool{
	"MiniMax-Hailuo-02": true, "MiniMax-Hailuo-2.3": true, "T2V-01": true, "T2V-01-Director": true,
	"I2V-01": true, "I2V-01-Director": true, "I2V-01-live": true,
}

// NewFakeMiniMax starts a fake MiniMax that expects key.
func NewFakeMiniMax(t testing.TB, key string) *FakeMiniMax {
	Secret(key)
	f := &FakeMiniMax{Key: key}
	f.videoVendor = newVideoVendor(t, "3617", f.serve)
	return f
}

func minimaxAnswer(w http.ResponseWriter, code int, msg string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["base_resp"] = map[string]any{"status_code": code, "status_msg": msg}
	writeJSONStatus(w, http.StatusOK, fields)
}

// serverError answers a fault the test set, in the vendor's shape.
func (f *FakeMiniMax) serverError(w http.ResponseWriter, status int) {
	if status == http.StatusOK {
		minimaxAnswer(w, 1000, "unknown error", nil)
		return
	}
	w.WriteHeader(status)
}

func (f *FakeMiniMax) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		minimaxAnswer(w, 1004, "login fail: Please carry the API secret key in the 'Authorization' field of the request header", nil)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/video_generation":
		if !f.submitGate(w, r, f.serverError) {
			f.submit(w, r)
		}
	case r.Method == http.MethodGet && r.URL.Path == "/v1/query/video_generation":
		if f.pollGate(w, r, f.serverError) {
			f.query(w, r.URL.Query().Get("task_id"))
		}
	case r.Method == http.MethodGet && r.URL.Path == "/v1/files/retrieve":
		f.retrieve(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "404 page not found")
	}
}

func (f *FakeMiniMax) submit(w http.ResponseWriter, r *http.Request) {
	raw, body, ok := readJSONObject(r)
	bad := func(format string, args ...any) {
		minimaxAnswer(w, 2013, "invalid params, "+fmt.Sprintf(format, args...), nil)
	}
	if !ok {
		bad("body is not a JSON object")
		return
	}
	model, _, _ := stringField(body, "model")
	if !minimaxModels[model] {
		bad("model %s is not supported", model)
		return
	}
	prompt, _, ok := stringField(body, "prompt")
	if !ok || len([]rune(prompt)) > 2000 {
		bad("prompt must be a string of at most 2000 characters")
		return
	}
	if strings.Contains(strings.ToLower(prompt), "forbidden") {
		minimaxAnswer(w, 1026, "input new_sensitive", nil)
		return
	}
	img, _, ok := stringField(body, "first_frame_image")
	if !ok || (img != "" && !isImageRef(img, true)) {
		bad("first_frame_image must be a URL or a data:image/...;base64 string")
		return
	}
	if strings.HasPrefix(model, "I2V") && img == "" {
		bad("first_frame_image is required for %s", model)
		return
	}
	if prompt == "" && img == "" {
		bad("prompt is required")
		return
	}
	duration := 6
	if raw, has := body["duration"]; has && (json.Unmarshal(raw, &duration) != nil || (duration != 6 && duration != 10)) {
		bad("duration must be 6 or 10")
		return
	}
	res, _, ok := stringField(body, "resolution")
	if !ok || (res != "" && res != "512P" && res != "768P" && res != "1080P") {
		bad("resolution must be 512P, 768P or 1080P")
		return
	}
	if res == "1080P" && duration == 10 {
		bad("1080P supports 6 seconds only")
		return
	}
	if _, _, ok := stringField(body, "callback_url"); !ok {
		bad("callback_url must be a string")
		return
	}
	j := f.accept(r.URL.Path, raw, float64(duration))
	minimaxAnswer(w, 0, "success", map[string]any{"task_id": j.ID})
}

func (f *FakeMiniMax) query(w http.ResponseWriter, id string) {
	j, ok := f.polled(id)
	if !ok {
		minimaxAnswer(w, 2013, "invalid params, task_id not found", nil)
		return
	}
	answer := map[string]any{"task_id": j.ID, "file_id": ""}
	switch j.State {
	case JobQueued:
		answer["status"] = "Queueing"
	case JobRunning:
		answer["status"] = "Processing"
	case JobSucceeded:
		answer["status"], answer["file_id"] = "Success", j.FileID
		answer["video_width"], answer["video_height"] = 1366, 768
	case JobFailed:
		answer["status"] = "Fail"
		minimaxAnswer(w, 1027, j.Reason, answer)
		return
	}
	minimaxAnswer(w, 0, "success", answer)
}

func (f *FakeMiniMax) retrieve(w http.ResponseWriter, r *http.Request) {
	if f.GroupID != "" && r.URL.Query().Get("GroupId") != f.GroupID {
		minimaxAnswer(w, 2013, "invalid params, GroupId is required", nil)
		return
	}
	fileID := r.URL.Query().Get("file_id")
	for _, j := range f.Jobs() {
		if j.FileID == fileID && j.State == JobSucceeded {
			var id int64
			fmt.Sscan(fileID, &id)
			minimaxAnswer(w, 0, "success", map[string]any{"file": map[string]any{
				"file_id": id, "bytes": 0, "created_at": time.Now().Unix(), "filename": "output.mp4",
				"purpose": "video_generation", "download_url": j.VideoURL,
			}})
			return
		}
	}
	minimaxAnswer(w, 1013, "file not found", nil)
}
