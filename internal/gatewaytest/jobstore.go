package gatewaytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
)

// JobStore is the job table every fake video vendor keeps: FakeOpenAI's
// Sora and FakeGemini's Veo (as their Videos) and FakeKling, FakeVidu,
// FakeSeedance and FakeMiniMax (embedded). A job stays where the test puts
// it, as a real job moves on the vendor's side while the gateway polls:
// submitted it is queued; Run (or Progress) starts it, Finish completes it
// with one video, Fail ends it with a reason. Each fake renders these
// states, and the faults below, in its vendor's words.
type JobStore struct {
	mu     sync.Mutex
	seq    int
	jobs   []*Job
	faults JobFaults
	polls  int // status reads answered
	// faulted counts status reads that met a fault the test set
	faulted int
	held    int // submits held by HoldSubmits right now
	// hanging counts status reads held by HangPolls right now, mostHanging
	// the most at once: several pollers of one task would hang together
	hanging, mostHanging int
	// keysToStorage counts downloads from signed storage that carried the
	// channel's key along (Veo)
	keysToStorage int
}

// Job states a test moves a job through.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// Job is one job a fake video vendor accepted.
type Job struct {
	ID   string
	Path string // the submit path
	// Body is the submit body byte for byte (JSON vendors), so a test can
	// check that the callback URL and the client's metadata reached the
	// vendor unchanged.
	Body   json.RawMessage
	Model  string
	Prompt string
	// Params are the submit's parameters other than model and prompt:
	// Sora's form fields (seconds, size, ...), Veo's parameters object.
	Params map[string]any
	// Image is the first frame the submit carried, and its media type.
	Image     []byte
	ImageType string
	State     string // JobQueued, JobRunning, JobSucceeded or JobFailed
	Progress  int
	Reason    string  // why it failed
	Seconds   float64 // the length of the video it makes, as submitted
	// VideoURL is where the finished video is served, on the fake itself
	// (vendors that answer with a URL).
	VideoURL string
	// FileID is the file a MiniMax job's video is stored as.
	FileID    string
	Polls     int // status reads of this job so far
	Downloads int
}

// JobFaults are how a fake vendor misbehaves; the zero value is none.
type JobFaults struct {
	PollStatus   int   // status reads answer this error status, in the vendor's shape
	HangPolls    bool  // status reads hold until the gateway hangs up
	HugePolls    int64 // status reads answer a 200 JSON body this long
	SubmitStatus int   // submits answer this error status
	HangSubmits  bool  // submits hold until the gateway hangs up
	// HoldSubmits makes a vendor slow to accept: each submit waits until
	// the channel is closed, then is taken as usual (one whose gateway
	// hung up meanwhile is not).
	HoldSubmits chan struct{}
}

// VideoBytes is the content a fake serves for a finished job.
func VideoBytes(id string) []byte { return []byte("\x00\x00\x00\x18ftypmp42fake video " + id) }

// add records an accepted job, queued; id, when set, names it from the
// store's sequence number (MiniMax's file id comes from the same number).
func (s *JobStore) add(j *Job, id func(seq int) string) Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if id != nil {
		j.ID = id(s.seq)
	}
	j.State = JobQueued
	s.jobs = append(s.jobs, j)
	return *j
}

// Jobs returns copies of every job accepted so far, oldest first.
func (s *JobStore) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, len(s.jobs))
	for i, j := range s.jobs {
		out[i] = *j
	}
	return out
}

// Last returns the newest job; it fails the test when there is none.
func (s *JobStore) Last(t testing.TB) Job {
	t.Helper()
	jobs := s.Jobs()
	if len(jobs) == 0 {
		t.Fatal("the fake vendor accepted no job")
	}
	return jobs[len(jobs)-1]
}

// Job returns a copy of job id.
func (s *JobStore) Job(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.find(id); j != nil {
		return *j, true
	}
	return Job{}, false
}

func (s *JobStore) find(id string) *Job {
	for _, j := range s.jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

func (s *JobStore) change(id string, f func(j *Job)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.find(id)
	if j == nil {
		panic("no video job " + id)
	}
	f(j)
}

// Run starts job id: it is running, progress half way.
func (s *JobStore) Run(id string) { s.Progress(id, 50) }

// Progress puts job id in progress at percent.
func (s *JobStore) Progress(id string, percent int) {
	s.change(id, func(j *Job) { j.State, j.Progress = JobRunning, percent })
}

// Finish completes job id with its video, as long as the submit asked.
func (s *JobStore) Finish(id string) {
	s.change(id, func(j *Job) { j.State, j.Progress = JobSucceeded, 100 })
}

// Fail ends job id with the vendor's reason.
func (s *JobStore) Fail(id, reason string) {
	s.change(id, func(j *Job) { j.State, j.Reason = JobFailed, reason })
}

// SetFaults replaces the fake's faults.
func (s *JobStore) SetFaults(f JobFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Polls is how many status reads were answered.
func (s *JobStore) Polls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

// Faulted is how many status reads met a fault the test set.
func (s *JobStore) Faulted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faulted
}

// MostHanging is the most status reads HangPolls held at once.
func (s *JobStore) MostHanging() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mostHanging
}

// Held is how many submits the fake is holding right now (HoldSubmits).
func (s *JobStore) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// KeysToStorage is how many signed-storage downloads carried a key.
func (s *JobStore) KeysToStorage() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keysToStorage
}

// submitGate answers a submit with the fault set, if any (vendorError
// writes it in the vendor's shape), and reports whether it did.
func (s *JobStore) submitGate(w http.ResponseWriter, r *http.Request, vendorError func(w http.ResponseWriter, status int)) bool {
	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	switch {
	case f.HangSubmits:
		// the body read first: only then does the server see the
		// gateway hang up
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return true
	case f.SubmitStatus != 0:
		vendorError(w, f.SubmitStatus)
		return true
	case f.HoldSubmits != nil:
		// the body read first, as for HangSubmits, and given back whole
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		s.mu.Lock()
		s.held++
		s.mu.Unlock()
		select {
		case <-f.HoldSubmits:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
		return r.Context().Err() != nil
	}
	return false
}

// pollGate lets a status read through, or answers the fault the test set
// (vendorError writes a status in the vendor's shape) and returns false.
func (s *JobStore) pollGate(w http.ResponseWriter, r *http.Request, vendorError func(w http.ResponseWriter, status int)) bool {
	s.mu.Lock()
	f := s.faults
	if f.HangPolls || f.HugePolls > 0 || f.PollStatus != 0 {
		s.faulted++
	}
	s.mu.Unlock()
	switch {
	case f.HangPolls:
		s.mu.Lock()
		s.hanging++
		s.mostHanging = max(s.mostHanging, s.hanging)
		s.mu.Unlock()
		<-r.Context().Done()
		s.mu.Lock()
		s.hanging--
		s.mu.Unlock()
		return false
	case f.HugePolls > 0:
		writeHuge(w, f.HugePolls)
		return false
	case f.PollStatus != 0:
		vendorError(w, f.PollStatus)
		return false
	}
	return true
}

// polled counts a status read that passed the gate and returns job id as
// it stands.
func (s *JobStore) polled(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	j := s.find(id)
	if j == nil {
		return Job{}, false
	}
	j.Polls++
	return *j, true
}

// download counts a download of job id and returns it as it stands.
func (s *JobStore) download(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.find(id)
	if j == nil {
		return Job{}, false
	}
	j.Downloads++
	return *j, true
}

// storageKeyed counts a signed-storage download that carried a key.
func (s *JobStore) storageKeyed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keysToStorage++
}
