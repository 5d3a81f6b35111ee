package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// config serves sora-2 on an OpenAI channel and Veo on a Gemini
// channel through the task endpoints, polled every 50ms (unless o says
// otherwise) so the tests move fast; {{JOURNAL}} differs per instance.
func (o taskOptions) config() *caddyfile {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return gatewayConfig().
		option("token_cache_ttl 1s").
		option("max_request_body 1MB").
		option(block("usage", "journal {{JOURNAL}}")).
		option(block("tasks",
			"max_age "+or(o.maxAge, "24h"),
			"poll_interval "+or(o.poll, "50ms"),
			"max_poll_interval "+or(o.maxPoll, "200ms"),
			"poll_timeout 2s",
			"lease "+or(o.lease, "10s"),
			"max_file_size "+or(o.maxFile, "1MB"))).
		channel("openai", "openai", "{{OPENAI}}", "sk-up-openai", "sora-2 gpt-4o-mini",
			"max_response_body 64KB", "priority 10").
		channel("openai-backup", "openai", "{{OPENAI2}}", "sk-up-openai-2", "sora-2").
		channel("gemini", "gemini", "{{GEMINI}}", "sk-up-gemini", "veo-3.0-generate-001", "timeout 1s").
		price("sora-2", "video_second 0.10", "max_seconds 12").
		price("veo-3.0-generate-001", "video_second 0.40", "max_seconds 8").
		price("gpt-4o-mini", "input 0.15", "output 0.60").
		// priced per second, on a family that runs no tasks
		channel("claude", "anthropic", "http://127.0.0.1:9", "sk-up-never-called", "claude-video").
		price("claude-video", "video_second 0.10", "max_seconds 4").
		withSite(tasksSite...)
}

// tasksSite logs to stderr and serves the task endpoints and the model
// endpoints.
var tasksSite = []string{
	logToStderr,
	"@tasks path /api/generate/*",
	block("route @tasks", "gateway_auth", "gateway_tasks"),
	block("route /v1/*", "gateway_auth", "gateway_relay"),
}

type taskSetup struct {
	gw     *gatewaytest.Gateway
	openai *gatewaytest.FakeOpenAI
	backup *gatewaytest.FakeOpenAI // sora-2's lower-priority channel
	gemini *gatewaytest.FakeGemini
	vars   gatewaytest.Vars
	cfg    *caddyfile
}

func startTasks(t *testing.T, maxAge string) *taskSetup {
	t.Helper()
	return startTasksWith(t, taskOptions{maxAge: maxAge})
}

// taskOptions is what differs between the tests' gateways; zero fields
// take the defaults of its config.
type taskOptions struct {
	maxAge, maxFile, poll, maxPoll, lease string
}

func startTasksWith(t *testing.T, o taskOptions) *taskSetup {
	t.Helper()
	s := &taskSetup{openai: gatewaytest.NewFakeOpenAI(t, "sk-up-openai"), gemini: gatewaytest.NewFakeGemini(t, "sk-up-gemini"),
		backup: gatewaytest.NewFakeOpenAI(t, "sk-up-openai-2")}
	dir := t.TempDir()
	s.vars = gatewaytest.Vars{"OPENAI": s.openai.URL, "OPENAI2": s.backup.URL, "GEMINI": s.gemini.URL,
		"DB": filepath.Join(dir, "gateway.db"), "JOURNAL": filepath.Join(dir, "journal-1")}
	s.cfg = o.config()
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	s.gw.DBPath = s.vars["DB"]
	return s
}

// taskAnswer is the task endpoints' envelope.
type taskAnswer struct {
	Code int `json:"code"`
	Data struct {
		TaskID       string `json:"task_id"`
		Model        string `json:"model"`
		Status       string `json:"status"`
		Progress     *int   `json:"progress"`
		CreatedTime  string `json:"created_time"`
		FinishedTime string `json:"finished_time"`
		ErrorMessage string `json:"error_message"`
		Files        []struct {
			URL  string `json:"file_url"`
			Type string `json:"file_type"`
		} `json:"files"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func decodeTask(t *testing.T, status int, body []byte) taskAnswer {
	t.Helper()
	var a taskAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, body)
	}
	if a.Code != status {
		t.Fatalf("envelope code %d with HTTP %d: %s", a.Code, status, body)
	}
	return a
}

func submitTask(t *testing.T, gw *gatewaytest.Gateway, key, body string) taskAnswer {
	t.Helper()
	resp, b := gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(body), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit answered %d: %s", resp.StatusCode, b)
	}
	return decodeTask(t, resp.StatusCode, b)
}

func taskStatus(t *testing.T, gw *gatewaytest.Gateway, key, id string) taskAnswer {
	t.Helper()
	resp, b := gw.Do(http.MethodGet, "/api/generate/status/"+id, key, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status answered %d: %s", resp.StatusCode, b)
	}
	return decodeTask(t, resp.StatusCode, b)
}

// waitTask polls the status endpoint until the task reaches status.
func waitTask(t *testing.T, gw *gatewaytest.Gateway, key, id, status string) taskAnswer {
	t.Helper()
	var last taskAnswer
	eventually(t, "task "+id+" to be "+status, func() bool {
		last = taskStatus(t, gw, key, id)
		return last.Data.Status == status
	})
	return last
}

var taskIDPattern = regexp.MustCompile(`^task_[a-z2-7]{26}$`)

var taskTimePattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$`)

// pngPixel is a one-pixel PNG, the first frame of image-to-video tests.
var pngPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGBwAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

func TestTaskSoraFormA(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	other := s.gw.AddUser("eve", 5_000_000)
	image := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngPixel)

	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"a red kite over the sea","duration":8,"size":"1280x720","image":"`+image+`"}`)
	if !taskIDPattern.MatchString(sub.Data.TaskID) || sub.Data.Status != "not_started" || !taskTimePattern.MatchString(sub.Data.CreatedTime) {
		t.Fatalf("submit answer: %+v", sub.Data)
	}
	// the worst case, 8 s at 0.10 USD, left the balance at submit
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-800_000 {
		t.Fatalf("quota after submit %d, want the 800000 reservation taken", q)
	}
	job := s.openai.Videos.Last(t)
	if job.Model != "sora-2" || job.Prompt != "a red kite over the sea" || job.Params["seconds"] != "8" ||
		job.Params["size"] != "1280x720" || !bytes.Equal(job.Image, pngPixel) || job.ImageType != "image/png" {
		t.Fatalf("OpenAI received %+v", job)
	}
	if st := taskStatus(t, s.gw, key, sub.Data.TaskID); st.Data.Status != "not_started" || st.Data.Model != "sora-2" ||
		st.Data.Progress == nil || *st.Data.Progress != 0 || st.Data.Files == nil || st.Data.FinishedTime != "" {
		t.Fatalf("queued status: %+v", st.Data)
	}

	s.openai.Videos.Progress(job.ID, 40)
	eventually(t, "progress 40", func() bool {
		st := taskStatus(t, s.gw, key, sub.Data.TaskID)
		return st.Data.Status == "running" && *st.Data.Progress == 40
	})
	// someone else's key sees no such task
	for _, p := range []string{"/api/generate/status/" + sub.Data.TaskID, "/api/generate/file/" + sub.Data.TaskID + "/0"} {
		resp, b := s.gw.Do(http.MethodGet, p, other, nil, nil)
		a := decodeTask(t, resp.StatusCode, b)
		if resp.StatusCode != http.StatusNotFound || a.Error == nil || strings.Contains(string(b), "sora") {
			t.Fatalf("%s for another user: %d %s", p, resp.StatusCode, b)
		}
	}

	s.openai.Videos.Finish(job.ID)
	done := waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
	if *done.Data.Progress != 100 || !taskTimePattern.MatchString(done.Data.FinishedTime) || done.Data.ErrorMessage != "" ||
		len(done.Data.Files) != 1 || done.Data.Files[0].Type != "video" {
		t.Fatalf("finished status: %+v", done.Data)
	}
	// the file is the gateway's own URL: OpenAI's needs the channel's key
	fileURL := done.Data.Files[0].URL
	if !strings.HasPrefix(fileURL, s.gw.URL+"/api/generate/file/"+sub.Data.TaskID+"/") {
		t.Fatalf("file URL %q is not the gateway's", fileURL)
	}
	path := strings.TrimPrefix(fileURL, s.gw.URL)
	resp, b := s.gw.Do(http.MethodGet, path, key, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(b, gatewaytest.VideoBytes(job.ID)) || resp.Header.Get("Content-Type") != "video/mp4" {
		t.Fatalf("file download: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if resp, _ := s.gw.Do(http.MethodGet, path, "", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("file without a key: %d", resp.StatusCode)
	}

	// a task without a duration reserves the longest video and is charged
	// the seconds it made
	sub2 := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"a short clip"}`)
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-800_000-1_200_000 {
		t.Fatalf("quota with a 12 s reservation held: %d", q)
	}
	job2 := s.openai.Videos.Last(t)
	if _, set := job2.Params["seconds"]; set {
		t.Fatalf("seconds sent though the client named no duration: %+v", job2.Params)
	}
	s.openai.Videos.Finish(job2.ID)
	waitTask(t, s.gw, key, sub2.Data.TaskID, "finished")
	rows := s.gw.WaitUsage("ada", 2)
	if len(rows) != 2 || rows[0].Cost != 800_000 || rows[1].Cost != 400_000 || rows[0].Model != "sora-2" || rows[0].Endpoint != "/api/generate/submit" {
		t.Fatalf("usage rows: %+v", rows)
	}
	if q, used := s.gw.Quota("ada"); q != 5_000_000-1_200_000 || used != 1_200_000 {
		t.Fatalf("quota %d used %d after both settled, want 3800000 and 1200000", q, used)
	}
	if c := s.gw.Metrics()[`gateway_cost_units_total{model="sora-2"}`]; c != 1_200_000 {
		t.Fatalf("gateway_cost_units_total for sora-2: %v", c)
	}
}

func TestTaskVeoFormB(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)

	// Form B, with the vendor's own options under input.metadata
	sub := submitTask(t, s.gw, key, `{"model":"veo-3.0-generate-001","input":{"prompt":"a lighthouse at dusk",
		"aspect_ratio":"16:9","negative_prompt":"people","duration":6,
		"metadata":{"personGeneration":"allow_adult","enhancePrompt":true}}}`)
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-2_400_000 {
		t.Fatalf("quota after submit %d, want 6 s at 0.40 USD reserved", q)
	}
	job := s.gemini.Videos.Last(t)
	want := map[string]any{"aspectRatio": "16:9", "negativePrompt": "people", "durationSeconds": 6.0,
		"personGeneration": "allow_adult", "enhancePrompt": true}
	if job.Model != "veo-3.0-generate-001" || job.Prompt != "a lighthouse at dusk" || fmt.Sprint(job.Params) != fmt.Sprint(want) {
		t.Fatalf("Veo received %+v, want parameters %v", job, want)
	}
	s.gemini.Videos.Progress(job.ID, 0)
	waitTask(t, s.gw, key, sub.Data.TaskID, "running")
	s.gemini.Videos.Fail(job.ID, "The video could not be generated: audio generation failed.")
	failed := waitTask(t, s.gw, key, sub.Data.TaskID, "failed")
	if !strings.Contains(failed.Data.ErrorMessage, "audio generation failed") || failed.Data.FinishedTime == "" || len(failed.Data.Files) != 0 {
		t.Fatalf("failed status: %+v", failed.Data)
	}
	// refunded whole, with one row that costs nothing
	rows := s.gw.WaitUsage("ada", 1)
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 || rows[0].Cost != 0 {
		t.Fatalf("after a failed task: quota %d used %d rows %+v", q, used, rows)
	}

	// image-to-video, finished; the file comes through the gateway, which
	// follows Google's redirect to signed storage without the key
	image := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngPixel)
	sub2 := submitTask(t, s.gw, key, `{"model":"veo-3.0-generate-001","input":{"prompt":"the lighthouse turns on","image":"`+image+`"}}`)
	job2 := s.gemini.Videos.Last(t)
	if !bytes.Equal(job2.Image, pngPixel) || job2.ImageType != "image/png" {
		t.Fatalf("Veo's image: %q %q", job2.Image, job2.ImageType)
	}
	s.gemini.Videos.Finish(job2.ID)
	done := waitTask(t, s.gw, key, sub2.Data.TaskID, "finished")
	if len(done.Data.Files) != 1 || done.Data.Files[0].Type != "video" {
		t.Fatalf("finished status: %+v", done.Data)
	}
	resp, b := s.gw.Do(http.MethodGet, strings.TrimPrefix(done.Data.Files[0].URL, s.gw.URL), key, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(b, gatewaytest.VideoBytes(job2.ID)) {
		t.Fatalf("Veo file: %d %q", resp.StatusCode, b)
	}
	if n := s.gemini.Videos.KeysToStorage(); n != 0 {
		t.Fatalf("the channel's key followed the redirect to storage %d times", n)
	}
	// no duration: charged the longest video reserved, 8 s
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-3_200_000 {
		t.Fatalf("quota after an 8 s Veo video: %d", q)
	}
}

func TestTaskRefusals(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"callback under input", `{"model":"sora-2","input":{"prompt":"x","callback_url":"https://hooks.example.com/cb"}}`, 400, "belongs under 'input.metadata'"},
		{"callback at the top of form A", `{"model":"sora-2","prompt":"x","callback_url":"https://hooks.example.com/cb"}`, 400, "belongs under 'metadata'"},
		{"mixed forms", `{"model":"sora-2","prompt":"x","input":{"prompt":"y"}}`, 400, "mixes the two forms"},
		{"metadata beside input", `{"model":"sora-2","metadata":{},"input":{"prompt":"y"}}`, 400, "mixes the two forms"},
		{"model in metadata", `{"model":"sora-2","prompt":"x","metadata":{"model":"sora-2-pro"}}`, 400, "set by the gateway"},
		{"model in input.metadata", `{"model":"sora-2","input":{"prompt":"x","metadata":{"model":"sora-2-pro"}}}`, 400, "'input.metadata.model'"},
		{"a price-changing vendor field", `{"model":"sora-2","prompt":"x","metadata":{"seconds":"12"}}`, 400, "'metadata.seconds'"},
		{"http callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"http://hooks.example.com/cb"}}`, 400, "must use https"},
		{"localhost callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://localhost/cb"}}`, 400, "localhost"},
		{"sub-localhost callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://api.localhost:8443/cb"}}`, 400, "localhost"},
		{"private callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://10.1.2.3/cb"}}`, 400, "private"},
		{"link-local callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://169.254.169.254/latest"}}`, 400, "link-local"},
		{"IPv6 loopback callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://[::1]/cb"}}`, 400, "loopback"},
		{"IPv4-mapped loopback callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://[::ffff:127.0.0.1]/cb"}}`, 400, "loopback"},
		{"short-form IP callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://127.1/cb"}}`, 400, "neither a name nor an IP"},
		{"relative callback", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"/cb"}}`, 400, "absolute https URL"},
		{"callback for a polling-only family", `{"model":"sora-2","prompt":"x","metadata":{"callback_url":"https://hooks.example.com/cb"}}`, 400, "poll GET /api/generate/status/"},
		{"callback for Veo", `{"model":"veo-3.0-generate-001","input":{"prompt":"x","metadata":{"callback_url":"https://hooks.example.com/cb"}}}`, 400, "polling-only"},
		{"a chat model", `{"model":"gpt-4o-mini","prompt":"x"}`, 400, "not a task model"},
		{"a family that runs no tasks", `{"model":"claude-video","prompt":"x"}`, 400, "no channel serving it runs submitted tasks"},
		{"unknown model", `{"model":"no-such-model","prompt":"x"}`, 404, "does not exist"},
		{"no prompt", `{"model":"sora-2","input":{}}`, 400, "'input.prompt' is required"},
		{"no model", `{"prompt":"x"}`, 400, "'model' is required"},
		{"unknown field", `{"model":"sora-2","prompt":"x","style":"noir"}`, 400, "go under 'metadata'"},
		{"seed for Veo", `{"model":"veo-3.0-generate-001","prompt":"x","seed":7}`, 400, "takes no seed"},
		{"negative prompt for Sora", `{"model":"sora-2","prompt":"x","negative_prompt":"rain"}`, 400, "takes no negative_prompt"},
		{"Sora's aspect ratio", `{"model":"sora-2","prompt":"x","aspect_ratio":"4:3"}`, 400, "16:9 or 9:16"},
		{"bad duration", `{"model":"sora-2","prompt":"x","duration":"long"}`, 400, "'duration' must be a whole number"},
		{"metadata not an object", `{"model":"sora-2","prompt":"x","metadata":[1]}`, 400, "'metadata' must be a JSON object"},
		{"not JSON", `model=sora-2`, 400, "JSON object"},
		{"duplicate key", `{"model":"sora-2","prompt":"x","prompt":"y"}`, 400, "prompt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(tt.body), nil)
			a := decodeTask(t, resp.StatusCode, b)
			if resp.StatusCode != tt.status || a.Error == nil || !strings.Contains(a.Error.Message, tt.want) || a.Error.Type == "" {
				t.Fatalf("got %d %s, want %d with %q", resp.StatusCode, b, tt.status, tt.want)
			}
		})
	}
	// a key limited to other models
	limited := s.gw.AddToken("ada", "--models", "veo-3.0-generate-001")
	resp, b := s.gw.Do(http.MethodPost, "/api/generate/submit", limited, []byte(`{"model":"sora-2","prompt":"x"}`), nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != 403 || !strings.Contains(a.Error.Message, "may not use model sora-2") {
		t.Fatalf("a key without sora-2: %d %s", resp.StatusCode, b)
	}
	// a task model is not relayed as a chat model, where it would cost nothing
	resp, b = s.gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"sora-2","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "POST /api/generate/submit") || !strings.Contains(string(b), `"error":{"message"`) {
		t.Fatalf("sora-2 on chat completions: %d %s", resp.StatusCode, b)
	}
	if n := len(s.openai.Requests()); n != 0 {
		t.Fatalf("the chat request reached OpenAI (%d requests)", n)
	}
	// none of it reached a vendor or cost anything
	if n := len(s.openai.Videos.Jobs()) + len(s.gemini.Videos.Jobs()); n != 0 {
		t.Fatalf("%d refused submits reached a vendor", n)
	}
	rows := s.gw.WaitUsage("ada", len(tests)+2)
	for _, r := range rows {
		if r.Cost != 0 || r.Status < 400 {
			t.Fatalf("a refused request's row: %+v", r)
		}
	}
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("refusals cost quota %d used %d", q, used)
	}
	// no key, and a task that is not there, in the task error shape
	resp, b = s.gw.Do(http.MethodPost, "/api/generate/submit", "", []byte(`{"model":"sora-2","prompt":"x"}`), nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != 401 || a.Error == nil {
		t.Fatalf("no key: %d %s", resp.StatusCode, b)
	}
	resp, b = s.gw.Do(http.MethodGet, "/api/generate/status/task_doesnotexist", key, nil, nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != 404 || a.Error == nil {
		t.Fatalf("unknown task: %d %s", resp.StatusCode, b)
	}
	resp, b = s.gw.Do(http.MethodGet, "/api/generate/submit", key, nil, nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != 405 || a.Error == nil {
		t.Fatalf("GET submit: %d %s", resp.StatusCode, b)
	}
}

// TestTaskStatusRefreshes: when a task's next poll is far off (its
// backoff has grown), a status call asks the vendor itself, so a client
// that learned the news elsewhere gets the normalized record in one call.
func TestTaskStatusRefreshes(t *testing.T) {
	s := startTasksWith(t, taskOptions{poll: "100ms", maxPoll: "1h"})
	key := s.gw.AddUser("ada", 5_000_000)
	sub := submitTask(t, s.gw, key, `{"model":"sora-2","prompt":"x","duration":4}`)
	job := s.openai.Videos.Last(t)
	// seven polls: the poller's next one is 1.7 s away
	eventually(t, "seven polls", func() bool { j, _ := s.openai.Videos.Job(job.ID); return j.Polls >= 7 })
	time.Sleep(150 * time.Millisecond) // the stored state is older than poll_interval
	s.openai.Videos.Finish(job.ID)
	st := taskStatus(t, s.gw, key, sub.Data.TaskID)
	if st.Data.Status != "finished" || len(st.Data.Files) != 1 || *st.Data.Progress != 100 {
		t.Fatalf("one status call after the vendor finished: %+v", st.Data)
	}
	s.gw.WaitUsage("ada", 1)
	if q, _ := s.gw.Quota("ada"); q != 4_600_000 {
		t.Fatalf("quota after a refreshed task: %d", q)
	}
}

// TestTaskBounds: a body past max_request_body is a 413, and a file past
// max_file_size is not streamed.
func TestTaskBounds(t *testing.T) {
	s := startTasks(t, "24h")
	key := s.gw.AddUser("ada", 5_000_000)
	big := strings.Repeat("A", 2<<20)
	resp, b := s.gw.Do(http.MethodPost, "/api/generate/submit", key, []byte(`{"model":"sora-2","prompt":"x","image":"`+big+`"}`), nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != http.StatusRequestEntityTooLarge || a.Error == nil {
		t.Fatalf("a 2 MB body: %d %s", resp.StatusCode, b)
	}

	small := startTasksWith(t, taskOptions{maxFile: "16"})
	key = small.gw.AddUser("bo", 5_000_000)
	sub := submitTask(t, small.gw, key, `{"model":"sora-2","prompt":"x","duration":4}`)
	job := small.openai.Videos.Last(t)
	small.openai.Videos.Finish(job.ID)
	done := waitTask(t, small.gw, key, sub.Data.TaskID, "finished")
	resp, b = small.gw.Do(http.MethodGet, strings.TrimPrefix(done.Data.Files[0].URL, small.gw.URL), key, nil, nil)
	if a := decodeTask(t, resp.StatusCode, b); resp.StatusCode != http.StatusBadGateway || !strings.Contains(a.Error.Message, "max_file_size") {
		t.Fatalf("a file past max_file_size: %d %s", resp.StatusCode, b)
	}
}
