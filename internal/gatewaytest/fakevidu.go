package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FakeVidu is Vidu's enterprise task API as its reference describes it:
// POST /ent/v2/text2video and /ent/v2/img2video accept a job and answer it
// echoed with task_id and state "created"; GET /ent/v2/tasks/{id}/creations
// reads it, state created, queueing, processing, success (with creations
// [{id, url, cover_url, watermarked_url}]) or failed (with err_code). The
// key travels as "Authorization: Token <key>"; a wrong one gets 401. A bad
// body gets 400 {code, reason, message}, an unknown task 404.
type FakeVidu struct {
	*videoVendor
	Key string
}

// viduModels are the models each endpoint serves, with the lengths each
// model makes (seconds) and its default.
var viduModels = map[string]map[string][]int{
	"text2video": {"viduq2": {5, 1, 2, 3, 4, 6, 7, 8, 9, 10}, "viduq1": {5}, "vidu1.5": {4, 8}},
	"img2video": {"viduq2-pro": {5, 1, 2, 3, 4, 6, 7, 8, 9, 10}, "viduq2-turbo": {5, 1, 2, 3, 4, 6, 7, 8, 9, 10},
		"viduq1": {5}, "viduq1-classic": {5}, "vidu2.0": {4, 8}, "vidu1.5": {4, 8}},
}

// NewFakeVidu starts a fake Vidu that expects key.
func NewFakeVidu(t testing.TB, key string) *FakeVidu {
	Secret(key)
	f := &FakeVidu{Key: key}
	f.videoVendor = newVideoVendor(t, "vd", f.serve)
	return f
}

func viduError(w http.ResponseWriter, status int, reason, msg string) {
	writeJSONStatus(w, status, map[string]any{"code": status, "reason": reason, "message": msg, "metadata": map[string]any{}})
}

// serverError answers a fault the test set, in the vendor's shape.
func (f *FakeVidu) serverError(w http.ResponseWriter, status int) {
	viduError(w, status, "InternalServiceFailure", "internal service failure")
}

func (f *FakeVidu) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Token "+f.Key {
		viduError(w, http.StatusUnauthorized, "UnAuthorized", "invalid api key")
		return
	}
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/ent/v2/text2video" || r.URL.Path == "/ent/v2/img2video"):
		if !f.submitGate(w, r, f.serverError) {
			f.submit(w, r, strings.TrimPrefix(r.URL.Path, "/ent/v2/"))
		}
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/ent/v2/tasks/") && strings.HasSuffix(r.URL.Path, "/creations"):
		if f.pollGate(w, r, f.serverError) {
			f.query(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/ent/v2/tasks/"), "/creations"))
		}
	default:
		viduError(w, http.StatusNotFound, "NotFound", "404 page not found")
	}
}

func (f *FakeVidu) submit(w http.ResponseWriter, r *http.Request, endpoint string) {
	raw, body, ok := readJSONObject(r)
	bad := func(format string, args ...any) {
		viduError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf(format, args...))
	}
	if !ok {
		bad("request body is not a JSON object")
		return
	}
	model, _, ok := stringField(body, "model")
	lengths := viduModels[endpoint][model]
	if !ok || lengths == nil {
		bad("model %q is not supported by %s", model, endpoint)
		return
	}
	prompt, _, ok := stringField(body, "prompt")
	if !ok || utf8.RuneCountInString(prompt) > 2000 || (endpoint == "text2video" && prompt == "") {
		bad("prompt is required and must be at most 2000 characters")
		return
	}
	if endpoint == "img2video" {
		var images []string
		if json.Unmarshal(body["images"], &images) != nil || len(images) != 1 || !isImageRef(images[0], true) {
			bad("images must hold exactly one image URL or data:image/<type>;base64 string")
			return
		}
	} else if ar, _, ok := stringField(body, "aspect_ratio"); !ok || (ar != "" && ar != "16:9" && ar != "9:16" && ar != "1:1" && ar != "3:4" && ar != "4:3") {
		bad("aspect_ratio %q is invalid", ar)
		return
	}
	duration := lengths[0]
	if raw, has := body["duration"]; has {
		if json.Unmarshal(raw, &duration) != nil || !containsInt(lengths, duration) {
			bad("duration %s is not supported by %s", raw, model)
			return
		}
	}
	if res, _, ok := stringField(body, "resolution"); !ok || (res != "" && res != "360p" && res != "540p" && res != "720p" && res != "1080p") {
		bad("resolution %q is invalid", res)
		return
	}
	var seed int64
	if raw, has := body["seed"]; has && json.Unmarshal(raw, &seed) != nil {
		bad("seed must be an integer")
		return
	}
	if _, _, ok := stringField(body, "callback_url"); !ok {
		bad("callback_url must be a string")
		return
	}
	j := f.accept(r.URL.Path, raw, float64(duration))
	answer := map[string]any{}
	for k, v := range body {
		answer[k] = v
	}
	delete(answer, "callback_url")
	answer["task_id"], answer["state"], answer["duration"] = j.ID, "created", duration
	answer["credits"], answer["created_at"] = duration*4, time.Now().UTC().Format(time.RFC3339Nano)
	writeJSONStatus(w, http.StatusOK, answer)
}

func (f *FakeVidu) query(w http.ResponseWriter, id string) {
	j, ok := f.polled(id)
	if !ok {
		viduError(w, http.StatusNotFound, "TaskNotFound", "task not found")
		return
	}
	answer := map[string]any{"id": j.ID, "err_code": "", "credits": int(j.Seconds) * 4, "payload": "", "creations": []any{}}
	switch j.State {
	case JobQueued:
		answer["state"] = "queueing"
	case JobRunning:
		answer["state"] = "processing"
	case JobSucceeded:
		answer["state"] = "success"
		answer["creations"] = []map[string]any{{"id": j.ID + "-c", "url": j.VideoURL, "cover_url": j.VideoURL + ".jpg", "watermarked_url": j.VideoURL + "?wm=1"}}
	case JobFailed:
		answer["state"], answer["err_code"] = "failed", j.Reason
	}
	writeJSONStatus(w, http.StatusOK, answer)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
