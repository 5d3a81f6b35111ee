package gatewaytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Vendor jobs, as the fake video vendors (FakeKling, FakeVidu, FakeSeedance,
// FakeMiniMax) hold them. A job stays where the test puts it: submitted it
// is queued; Run starts it, Finish completes it with one video, Fail ends
// it with a reason. Each fake renders these states in its vendor's words.
const (
	VendorQueued    = "queued"
	VendorRunning   = "running"
	VendorSucceeded = "succeeded"
	VendorFailed    = "failed"
)

// VendorJob is one job a fake video vendor accepted.
type VendorJob struct {
	ID   string
	Path string // the submit path
	// Body is the submit body byte for byte, so a test can check that the
	// callback URL and the client's metadata reached the vendor unchanged.
	Body     json.RawMessage
	State    string
	Progress int
	Reason   string  // why it failed
	Seconds  float64 // the length of the video it makes
	// VideoURL is where the finished video is served, on the fake itself.
	VideoURL string
	// FileID is the file a MiniMax job's video is stored as.
	FileID string
}

// vendorJobs is a fake vendor's job table and its file server.
type vendorJobs struct {
	*httptest.Server
	mu     sync.Mutex
	prefix string
	seq    int
	jobs   []*VendorJob
	polls  int
	// faults a test sets: status reads answer pollFault, or hang until
	// the caller gives up; faulted counts the reads so answered
	pollFault int
	hangPolls bool
	faulted   int
}

func newVendorJobs(t testing.TB, prefix string, serve http.HandlerFunc) *vendorJobs {
	v := &vendorJobs{prefix: prefix}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fake-files/{name}", v.serveFile)
	mux.HandleFunc("/", serve)
	v.Server = httptest.NewServer(mux)
	t.Cleanup(v.Server.Close)
	return v
}

// BaseURL is the address a channel's base_url names.
func (v *vendorJobs) BaseURL() string { return v.Server.URL }

// serveFile serves a finished job's video: a few bytes in an MP4 box.
func (v *vendorJobs) serveFile(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(r.PathValue("name"), ".mp4")
	j, ok := v.Job(id)
	if !ok || j.State != VendorSucceeded {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	fmt.Fprintf(w, "\x00\x00\x00\x18ftypmp42fake video of %s", id)
}

// add records an accepted job, queued.
func (v *vendorJobs) add(path string, body []byte, seconds float64) VendorJob {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	id := fmt.Sprintf("%s%06d", v.prefix, v.seq)
	j := &VendorJob{ID: id, Path: path, Body: append(json.RawMessage(nil), body...), State: VendorQueued, Seconds: seconds,
		VideoURL: v.Server.URL + "/fake-files/" + id + ".mp4", FileID: fmt.Sprintf("%d", 900000+v.seq)}
	v.jobs = append(v.jobs, j)
	return *j
}

// Jobs returns every job accepted so far, oldest first.
func (v *vendorJobs) Jobs() []VendorJob {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]VendorJob, len(v.jobs))
	for i, j := range v.jobs {
		out[i] = *j
	}
	return out
}

// Last returns the newest job; it fails the test when there is none.
func (v *vendorJobs) Last(t testing.TB) VendorJob {
	t.Helper()
	jobs := v.Jobs()
	if len(jobs) == 0 {
		t.Fatal("the fake vendor accepted no job")
	}
	return jobs[len(jobs)-1]
}

// Job returns the job id.
func (v *vendorJobs) Job(id string) (VendorJob, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, j := range v.jobs {
		if j.ID == id {
			return *j, true
		}
	}
	return VendorJob{}, false
}

// FailPolls makes status reads answer status, in the vendor's error shape
// (0: answer normally).
func (v *vendorJobs) FailPolls(status int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pollFault = status
}

// HangPolls makes status reads hang until the caller gives up.
func (v *vendorJobs) HangPolls(hang bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hangPolls = hang
}

// Faulted is how many status reads failed or hung on the test's command.
func (v *vendorJobs) Faulted() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.faulted
}

// pollGate lets a status read through, or answers the fault the test set
// (fail writes it in the vendor's shape) and returns false.
func (v *vendorJobs) pollGate(w http.ResponseWriter, r *http.Request, fail func(w http.ResponseWriter, status int)) bool {
	v.mu.Lock()
	hang, fault := v.hangPolls, v.pollFault
	if hang || fault != 0 {
		v.faulted++
	}
	v.mu.Unlock()
	switch {
	case hang:
		<-r.Context().Done()
		return false
	case fault != 0:
		fail(w, fault)
		return false
	}
	return true
}

// Polls is how many times the job status was read.
func (v *vendorJobs) Polls() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.polls
}

func (v *vendorJobs) polled() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.polls++
}

func (v *vendorJobs) change(id string, f func(j *VendorJob)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, j := range v.jobs {
		if j.ID == id {
			f(j)
			return
		}
	}
	panic("no video job " + id)
}

// Run starts job id: it is running, progress half way.
func (v *vendorJobs) Run(id string) {
	v.change(id, func(j *VendorJob) { j.State, j.Progress = VendorRunning, 50 })
}

// Finish completes job id with its video.
func (v *vendorJobs) Finish(id string) {
	v.change(id, func(j *VendorJob) { j.State, j.Progress = VendorSucceeded, 100 })
}

// Fail ends job id with reason.
func (v *vendorJobs) Fail(id, reason string) {
	v.change(id, func(j *VendorJob) { j.State, j.Reason = VendorFailed, reason })
}

// readJSONObject reads a submit body (bounded) and decodes it as an
// object; ok is false when it is not one.
func readJSONObject(r *http.Request) (raw []byte, body map[string]json.RawMessage, ok bool) {
	raw, err := readAllLimited(r, 32<<20)
	if err != nil {
		return nil, nil, false
	}
	if json.Unmarshal(raw, &body) != nil || body == nil {
		return raw, nil, false
	}
	return raw, body, true
}

func readAllLimited(r *http.Request, n int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, n+1))
	if err == nil && int64(len(raw)) > n {
		err = fmt.Errorf("body larger than %d bytes", n)
	}
	return raw, err
}

func isBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) > 0
}

// stringField returns body[key] as a string; present is false when absent,
// ok false when present but not a string.
func stringField(body map[string]json.RawMessage, key string) (s string, present, ok bool) {
	raw, present := body[key]
	if !present {
		return "", false, true
	}
	ok = json.Unmarshal(raw, &s) == nil
	return s, true, ok
}

// isImageRef reports whether s is what vendors take as an image: an http(s)
// URL, or base64 (dataURL: as a data:image/...;base64, URL, else bare).
func isImageRef(s string, dataURL bool) bool {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return true
	}
	if dataURL {
		rest, ok := strings.CutPrefix(s, "data:image/")
		if !ok {
			return false
		}
		_, b64, ok := strings.Cut(rest, ";base64,")
		return ok && isBase64(b64)
	}
	return !strings.HasPrefix(s, "data:") && isBase64(s)
}
