package gatewaytest

import (
	"bytes"
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
	"sync"
)

// VideoJobs is a fake vendor's table of video jobs. FakeOpenAI serves it
// as OpenAI's video API (Sora) and FakeGemini as Veo's long-running
// operations, each in its vendor's wire format; a job stays queued until
// the test moves it (Run, Finish, Fail), as a real job moves on the
// vendor's side while the gateway polls.
type VideoJobs struct {
	mu     sync.Mutex
	jobs   map[string]*VideoJob
	ids    []string
	faults VideoFaults
	// keysToStorage counts downloads from signed storage that carried the
	// channel's key along
	keysToStorage int
	held          int // submits held by HoldSubmits right now
}

// Held is how many submits the fake is holding right now (HoldSubmits).
func (v *VideoJobs) Held() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.held
}

// KeysToStorage is how many signed-storage downloads carried a key.
func (v *VideoJobs) KeysToStorage() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keysToStorage
}

// VideoJob is one job as the fake vendor holds it.
type VideoJob struct {
	ID     string
	Model  string
	Prompt string
	// Params are the submit's parameters other than model and prompt:
	// Sora's form fields (seconds, size, ...), Veo's parameters object.
	Params map[string]any
	// Image is the first frame the submit carried, and its media type.
	Image     []byte
	ImageType string
	Status    string // queued, running, finished or failed
	Progress  int
	Error     string
	Seconds   int // the video's length, once finished
	Polls     int // status queries so far
	Downloads int
}

// Job states a test moves a job through.
const (
	JobQueued   = "queued"
	JobRunning  = "running"
	JobFinished = "finished"
	JobFailed   = "failed"
)

func newVideoJobs() *VideoJobs { return &VideoJobs{jobs: map[string]*VideoJob{}} }

func (v *VideoJobs) add(j *VideoJob) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j.Status = JobQueued
	v.jobs[j.ID] = j
	v.ids = append(v.ids, j.ID)
}

// Jobs returns copies of every job, in submit order.
func (v *VideoJobs) Jobs() []VideoJob {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]VideoJob, 0, len(v.ids))
	for _, id := range v.ids {
		out = append(out, *v.jobs[id])
	}
	return out
}

// Last returns a copy of the newest job; ok is false when there is none.
func (v *VideoJobs) Last() (VideoJob, bool) {
	jobs := v.Jobs()
	if len(jobs) == 0 {
		return VideoJob{}, false
	}
	return jobs[len(jobs)-1], true
}

func (v *VideoJobs) move(id string, change func(j *VideoJob)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if j, ok := v.jobs[id]; ok {
		change(j)
	}
}

// Run puts a job in progress at progress percent.
func (v *VideoJobs) Run(id string, progress int) {
	v.move(id, func(j *VideoJob) { j.Status, j.Progress = JobRunning, progress })
}

// Finish completes a job with a video seconds long.
func (v *VideoJobs) Finish(id string, seconds int) {
	v.move(id, func(j *VideoJob) { j.Status, j.Progress, j.Seconds = JobFinished, 100, seconds })
}

// Fail ends a job with the vendor's reason.
func (v *VideoJobs) Fail(id, reason string) {
	v.move(id, func(j *VideoJob) { j.Status, j.Error = JobFailed, reason })
}

// VideoFaults are how a fake vendor misbehaves; the zero value is none.
type VideoFaults struct {
	PollStatus   int   // status queries answer this error status
	HangPolls    bool  // status queries hold until the gateway hangs up
	HugePolls    int64 // status queries answer a 200 JSON body this long
	SubmitStatus int   // submits answer this error status
	HangSubmits  bool  // submits hold until the gateway hangs up
	// HoldSubmits makes a vendor slow to accept: each submit waits until
	// the channel is closed, then is taken as usual (one whose gateway
	// hung up meanwhile is not).
	HoldSubmits chan struct{}
}

// SetFaults replaces the fake's faults.
func (v *VideoJobs) SetFaults(f VideoFaults) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.faults = f
}

func (v *VideoJobs) currentFaults() VideoFaults {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.faults
}

// submitFault answers a submit with the fault set, if any, in the vendor's
// error shape, and reports whether it did.
func (v *VideoJobs) submitFault(w http.ResponseWriter, r *http.Request, vendorError func(status int)) bool {
	f := v.currentFaults()
	switch {
	case f.HangSubmits:
		// the body read first: only then does the server see the
		// gateway hang up
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return true
	case f.SubmitStatus != 0:
		vendorError(f.SubmitStatus)
		return true
	case f.HoldSubmits != nil:
		// the body read first, as for HangSubmits, and given back whole
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		v.mu.Lock()
		v.held++
		v.mu.Unlock()
		select {
		case <-f.HoldSubmits:
		case <-r.Context().Done():
		}
		v.mu.Lock()
		v.held--
		v.mu.Unlock()
		return r.Context().Err() != nil
	}
	return false
}

// poll counts a status query and returns the job as it stands, or the
// fault to answer instead.
func (v *VideoJobs) poll(w http.ResponseWriter, r *http.Request, id string) (job VideoJob, ok bool, fault int) {
	v.mu.Lock()
	f := v.faults
	j, ok := v.jobs[id]
	if ok && f.PollStatus == 0 && !f.HangPolls && f.HugePolls == 0 {
		j.Polls++
		job = *j
	}
	v.mu.Unlock()
	switch {
	case f.HangPolls:
		<-r.Context().Done()
		return VideoJob{}, false, -1
	case f.HugePolls > 0:
		writeHuge(w, f.HugePolls)
		return VideoJob{}, false, -1
	}
	return job, ok, f.PollStatus
}

func (v *VideoJobs) download(id string) (VideoJob, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.jobs[id]
	if !ok {
		return VideoJob{}, false
	}
	j.Downloads++
	return *j, true
}

// VideoBytes is the content a fake serves for a finished job.
func VideoBytes(id string) []byte { return []byte("\x00\x00\x00\x18ftypmp42fake video " + id) }

// --- OpenAI's video API ---

// soraModels, soraSeconds and soraSizes are what OpenAI's video API
// reference allows.
var (
	soraModels  = []string{"sora-2", "sora-2-pro"}
	soraSeconds = []string{"4", "8", "12"}
	soraSizes   = []string{"720x1280", "1280x720", "1024x1792", "1792x1024"}
)

// serveSora answers /v1/videos... as OpenAI does.
func (v *VideoJobs) serveSora(w http.ResponseWriter, r *http.Request, key string) {
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
			if j.Status != JobFinished {
				writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Video is not ready yet, use GET /v1/videos/{video_id} to check status.")
				return
			}
			w.Header().Set("Content-Type", "video/mp4")
			w.Header().Set("Content-Length", strconv.Itoa(len(VideoBytes(id))))
			_, _ = w.Write(VideoBytes(id))
			return
		}
		j, ok, fault := v.poll(w, r, id)
		switch {
		case fault < 0:
			return
		case fault > 0:
			writeOpenAIError(w, fault, "server_error", "The server had an error while processing your request.")
			return
		case !ok:
			writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Video with id '"+id+"' not found.")
			return
		}
		writeJSON(w, soraObject(j))
	default:
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func (v *VideoJobs) soraCreate(w http.ResponseWriter, r *http.Request) {
	if v.submitFault(w, r, func(status int) {
		writeOpenAIError(w, status, "server_error", "The server had an error while processing your request.")
	}) {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Invalid Content-Type header, expected multipart/form-data.")
		return
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, 64<<20), params["boundary"])
	j := &VideoJob{ID: fmt.Sprintf("video_%d", fakeRequestIDs.Add(1)), Params: map[string]any{}}
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
	v.add(j)
	got, _ := v.Last()
	writeJSON(w, soraObject(got))
}

func writeSoraParamError(w http.ResponseWriter, msg, param, code string) {
	writeJSONStatus(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": param, "code": code}})
}

// soraObject is the job as OpenAI's video object.
func soraObject(j VideoJob) map[string]any {
	status := map[string]string{JobQueued: "queued", JobRunning: "in_progress", JobFinished: "completed", JobFailed: "failed"}[j.Status]
	seconds, _ := j.Params["seconds"].(string)
	if seconds == "" {
		seconds = "4"
	}
	if j.Seconds > 0 {
		seconds = strconv.Itoa(j.Seconds)
	}
	size, _ := j.Params["size"].(string)
	if size == "" {
		size = "720x1280"
	}
	o := map[string]any{"id": j.ID, "object": "video", "model": j.Model, "status": status,
		"progress": j.Progress, "created_at": 1761622232, "completed_at": nil, "expires_at": nil,
		"prompt": j.Prompt, "seconds": seconds, "size": size, "remixed_from_video_id": nil, "error": nil}
	if j.Status == JobFinished {
		o["completed_at"], o["expires_at"] = 1761622332, 1761708732
	}
	if j.Status == JobFailed {
		o["error"] = map[string]any{"code": "video_generation_failed", "message": j.Error}
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
func (v *VideoJobs) serveVeo(w http.ResponseWriter, r *http.Request, key string) bool {
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
			v.mu.Lock()
			v.keysToStorage++
			v.mu.Unlock()
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
		if !ok || j.Status != JobFinished || r.URL.Query().Get("alt") != "media" {
			geminiError(w, 404, "File not found.")
			return true
		}
		http.Redirect(w, r, "/signed/"+id+"?sig=ok-"+url.QueryEscape(id), http.StatusFound)
	case r.Method == http.MethodGet:
		_, opID, _ := strings.Cut(p, "/operations/")
		j, ok, fault := v.poll(w, r, opID)
		switch {
		case fault < 0:
		case fault > 0:
			geminiError(w, fault, "The service is currently unavailable.")
		case !ok:
			geminiError(w, 404, "Operation not found.")
		default:
			writeJSON(w, veoOperation(j, "http://"+r.Host))
		}
	default:
		geminiError(w, 404, "no such method")
	}
	return true
}

func (v *VideoJobs) veoCreate(w http.ResponseWriter, r *http.Request, model string) {
	if v.submitFault(w, r, func(status int) { geminiError(w, status, "The service is currently unavailable.") }) {
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
	j := &VideoJob{ID: fmt.Sprintf("op%d", fakeRequestIDs.Add(1)), Model: model, Prompt: inst.Prompt, Params: body.Parameters}
	if inst.Image != nil {
		j.Image, j.ImageType = inst.Image.BytesBase64Encoded, inst.Image.MimeType
	}
	v.add(j)
	writeJSON(w, map[string]any{"name": "models/" + model + "/operations/" + j.ID})
}

// veoOperation is the job as a Gemini API operation.
func veoOperation(j VideoJob, base string) map[string]any {
	op := map[string]any{"name": "models/" + j.Model + "/operations/" + j.ID}
	switch j.Status {
	case JobFinished:
		op["done"] = true
		op["response"] = map[string]any{
			"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": []any{
				map[string]any{"video": map[string]any{"uri": base + "/v1beta/files/" + j.ID + ":download?alt=media"}},
			}},
		}
	case JobFailed:
		op["done"] = true
		op["error"] = map[string]any{"code": 3, "message": j.Error, "status": "INVALID_ARGUMENT"}
	}
	return op
}
