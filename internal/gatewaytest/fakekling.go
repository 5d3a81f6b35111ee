package gatewaytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FakeKling is Kling's video task API as its reference describes it:
// POST /v1/videos/text2video and /v1/videos/image2video accept a job and
// answer {code: 0, message, request_id, data: {task_id, task_status:
// "submitted", ...}}; GET /v1/videos/{endpoint}/{task_id} reads it back at
// the endpoint that made it, task_status submitted, processing, succeed or
// failed (with task_status_msg), a finished one with task_result.videos
// [{id, url, duration}]. Every call must carry "Authorization: Bearer
// <JWT>", HS256-signed with the secret key, iss the access key, within
// its nbf and exp: anything else gets Kling's 401 (codes 1000-1004). A bad
// body gets a 400 with code 1201, an unknown task a 404 with code 1203.
type FakeKling struct {
	*videoVendor
	Access, Secret string
	now            func() time.Time
}

// klingModels are the model_name values each endpoint serves, as Kling's
// capability map lists them (kling-v1-5 and kling-v2-1 are image-to-video
// only).
var klingModels = map[string]map[string]bool{
	"text2video": {"kling-v1": true, "kling-v1-6": true, "kling-v2-master": true, "kling-v2-1-master": true, "kling-v2-5-turbo": true},
	"image2video": {"kling-v1": true, "kling-v1-5": true, "kling-v1-6": true, "kling-v2-master": true,
		"kling-v2-1": true, "kling-v2-1-master": true, "kling-v2-5-turbo": true},
}

// NewFakeKling starts a fake Kling that expects tokens signed by the key
// pair access, secret.
func NewFakeKling(t testing.TB, access, secret string) *FakeKling {
	Secret(access)
	Secret(secret)
	f := &FakeKling{Access: access, Secret: secret, now: time.Now}
	f.videoVendor = newVideoVendor(t, "kl-", f.serve)
	return f
}

func klingAnswer(w http.ResponseWriter, status, code int, message string, data any) {
	writeJSONStatus(w, status, map[string]any{"code": code, "message": message, "request_id": fmt.Sprintf("req-%d", time.Now().UnixNano()), "data": data})
}

// checkToken returns Kling's code and message for a bad token, 0 if good.
func (f *FakeKling) checkToken(r *http.Request) (int, string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return 1001, "Authorization is empty"
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	parts := strings.Split(token, ".")
	if !ok || len(parts) != 3 {
		return 1002, "Authorization is invalid"
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	hb, err1 := enc.DecodeString(parts[0])
	cb, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &header) != nil || header.Alg != "HS256" {
		return 1002, "Authorization is invalid"
	}
	mac := hmac.New(sha256.New, []byte(f.Secret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return 1000, "Authentication failed"
	}
	var claims struct {
		Iss      string
		Exp, Nbf *int64
	}
	if json.Unmarshal(cb, &claims) != nil || claims.Iss != f.Access || claims.Exp == nil {
		return 1000, "Authentication failed"
	}
	now := f.now().Unix()
	if claims.Nbf != nil && now < *claims.Nbf {
		return 1003, "Authorization is not yet valid"
	}
	if now >= *claims.Exp {
		return 1004, "Authorization has expired"
	}
	return 0, ""
}

// serverError answers a fault the test set, in the vendor's shape.
func (f *FakeKling) serverError(w http.ResponseWriter, status int) {
	klingAnswer(w, status, 5000, "Server internal error", nil)
}

func (f *FakeKling) serve(w http.ResponseWriter, r *http.Request) {
	if code, msg := f.checkToken(r); code != 0 {
		klingAnswer(w, http.StatusUnauthorized, code, msg, nil)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/videos/")
	endpoint, id, _ := strings.Cut(rest, "/")
	if !ok || (endpoint != "text2video" && endpoint != "image2video") {
		klingAnswer(w, http.StatusNotFound, 1202, "Request method is invalid", nil)
		return
	}
	switch {
	case r.Method == http.MethodPost && id == "":
		if !f.submitGate(w, r, f.serverError) {
			f.submit(w, r, endpoint)
		}
	case r.Method == http.MethodGet && id != "":
		if f.pollGate(w, r, f.serverError) {
			f.query(w, endpoint, id)
		}
	default:
		klingAnswer(w, http.StatusNotFound, 1202, "Request method is invalid", nil)
	}
}

func (f *FakeKling) submit(w http.ResponseWriter, r *http.Request, endpoint string) {
	raw, body, ok := readJSONObject(r)
	bad := func(msg string) { klingAnswer(w, http.StatusBadRequest, 1201, msg, nil) }
	if !ok {
		bad("request body is not a JSON object")
		return
	}
	model, present, ok := stringField(body, "model_name")
	if !present {
		model = "kling-v1"
	}
	if !ok || !klingModels[endpoint][model] {
		bad(fmt.Sprintf("model_name %s is invalid", model))
		return
	}
	prompt, _, ok := stringField(body, "prompt")
	if !ok || utf8.RuneCountInString(prompt) > 2500 {
		bad("prompt must be a string of at most 2500 characters")
		return
	}
	if endpoint == "text2video" && prompt == "" {
		bad("prompt is required")
		return
	}
	if endpoint == "image2video" {
		img, _, ok := stringField(body, "image")
		if !ok || img == "" {
			bad("image is required")
			return
		}
		if !isImageRef(img, false) {
			bad("image must be a URL or Base64 data without the data: prefix")
			return
		}
		if _, has := body["aspect_ratio"]; has {
			bad("aspect_ratio is not supported for image2video")
			return
		}
	} else if ar, _, ok := stringField(body, "aspect_ratio"); !ok || (ar != "" && ar != "16:9" && ar != "9:16" && ar != "1:1") {
		bad("aspect_ratio must be one of 16:9, 9:16, 1:1")
		return
	}
	seconds := 5.0
	if d, present, ok := stringField(body, "duration"); present {
		if !ok || (d != "5" && d != "10") {
			bad("duration must be the string \"5\" or \"10\"")
			return
		}
		if d == "10" {
			seconds = 10
		}
	}
	if cb, _, ok := stringField(body, "callback_url"); !ok || (cb != "" && !strings.HasPrefix(cb, "http")) {
		bad("callback_url is invalid")
		return
	}
	j := f.accept(r.URL.Path, raw, seconds)
	now := time.Now().UnixMilli()
	klingAnswer(w, http.StatusOK, 0, "SUCCEED", map[string]any{
		"task_id": j.ID, "task_status": "submitted", "task_info": map[string]any{}, "created_at": now, "updated_at": now,
	})
}

func (f *FakeKling) query(w http.ResponseWriter, endpoint, id string) {
	j, ok := f.polled(id)
	if !ok || j.Path != "/v1/videos/"+endpoint {
		klingAnswer(w, http.StatusNotFound, 1203, "The requested resource does not exist", nil)
		return
	}
	data := map[string]any{"task_id": j.ID, "task_info": map[string]any{}, "created_at": 0, "updated_at": 0}
	switch j.State {
	case JobQueued:
		data["task_status"] = "submitted"
	case JobRunning:
		data["task_status"] = "processing"
	case JobSucceeded:
		data["task_status"] = "succeed"
		data["task_status_msg"] = ""
		data["task_result"] = map[string]any{"videos": []map[string]any{
			{"id": j.ID + "-v", "url": j.VideoURL, "duration": fmt.Sprintf("%.1f", j.Seconds)},
		}}
	case JobFailed:
		data["task_status"] = "failed"
		data["task_status_msg"] = j.Reason
	}
	klingAnswer(w, http.StatusOK, 0, "SUCCEED", data)
}
