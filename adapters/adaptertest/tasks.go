package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The task kit checks a job-shaped family (adapters.TaskProvider) the way
// Run checks a dialect: one call, the whole contract, against fixtures
// under <Testdata>/tasks (NAME is free):
//
//	submit/NAME.json   {"model": upstream model, "request": a neutral task
//	                   (the fields of Form A and Form B: prompt, image,
//	                   duration, aspect_ratio, size, negative_prompt, seed,
//	                   metadata, callback_url), "answers": the vendor's
//	                   answers to the calls in order}
//	  NAME.golden        → every call the family made (method, URL, headers,
//	                     body) and the upstream id, or the error it returned
//	poll/NAME.json     {"id": upstream id, "answers": [...]}
//	  NAME.golden        → the calls and the TaskState, or the error
//	error/NAME.json    {"status": HTTP status, "body": the vendor's error
//	                   answer (a JSON string is sent as raw text)}
//	  NAME.golden        → DecodeError's *adapters.Error
//	file/NAME.json     {"id": upstream id, "file": {"file_url", "file_type"}}
//	  NAME.golden        → the request FetchFile builds (TaskFetcher only)
//
// An answer is {"status": 200, "header": {...}, "body": ...}. Besides the
// goldens the kit checks what must hold whatever the fixtures say: the
// owned fields are refused (400, param metadata.<field>) before any call;
// the key travels only where the suite says; a callback URL reaches the
// vendor unescaped when the family takes one; every state is one of the
// four with files only when finished; the fixtures reach a finished, a
// failed and a pending state; a refusal is an *adapters.Error; and every
// golden was checked by some fixture.

// TaskSuite describes one task family for RunTasks.
type TaskSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Provider, when set, is used instead of the registered module (a
	// family whose signing needs a fixed clock in tests).
	Provider adapters.TaskProvider
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/tasks.
	Testdata string
	// Key is the channel's key as the family takes it; default
	// "sk-adaptertest-key".
	Key string
	// KeyHeader is the header every call carries the credential in
	// (Authorization, x-goog-api-key); the key appears nowhere else, and
	// never in a body.
	KeyHeader string
	// Callback says whether the family takes a callback URL.
	Callback bool
	// Owned is what OwnedFields must return, in its order (nil: the
	// family owns nothing of the metadata).
	Owned []string
	// Fetcher says whether the family is an adapters.TaskFetcher (its
	// files are downloaded with the channel's key).
	Fetcher bool
}

// BaseURL is the upstream address the kit gives every task family.
const BaseURL = "https://vendor.test"

// taskFixture is one submit, poll, error or file fixture.
type taskFixture struct {
	Model   string       `json:"model"`
	Request *neutralTask `json:"request"`
	ID      string       `json:"id"`
	Answers []answer     `json:"answers"`
	File    *adapters.TaskFile
}

// neutralTask is a TaskRequest under the names the task endpoint's body
// forms give its fields.
type neutralTask struct {
	Model          string          `json:"model"`
	Prompt         string          `json:"prompt"`
	Image          string          `json:"image"`
	Duration       int             `json:"duration"`
	AspectRatio    string          `json:"aspect_ratio"`
	Size           string          `json:"size"`
	NegativePrompt string          `json:"negative_prompt"`
	Seed           *int64          `json:"seed"`
	Metadata       json.RawMessage `json:"metadata"`
	CallbackURL    string          `json:"callback_url"`
}

func (n *neutralTask) request() *adapters.TaskRequest {
	return &adapters.TaskRequest{Model: n.Model, Prompt: n.Prompt, Image: n.Image, Duration: n.Duration,
		AspectRatio: n.AspectRatio, Size: n.Size, NegativePrompt: n.NegativePrompt, Seed: n.Seed,
		Metadata: n.Metadata, CallbackURL: n.CallbackURL}
}

// taskKit is one RunTasks's state.
type taskKit struct {
	s       TaskSuite
	p       adapters.TaskProvider
	decoder interface {
		DecodeError(status int, body []byte) *adapters.Error
	}
	checked map[string]bool
	states  map[string]bool // the statuses the poll fixtures reached
}

// RunTasks checks a task family's whole contract against its fixtures.
// Call it once from the family's tests.
func RunTasks(t *testing.T, s TaskSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.Key == "" {
		s.Key = kitKey
	}
	if s.KeyHeader == "" {
		t.Fatal("adaptertest: TaskSuite.KeyHeader is required")
	}
	k := &taskKit{s: s, p: s.Provider, checked: map[string]bool{}, states: map[string]bool{}}
	if k.p == nil {
		mod := family(t, s.Name)
		p, ok := mod.Provider.(adapters.TaskProvider)
		if !ok {
			t.Fatalf("%s.%s is no adapters.TaskProvider", Namespace, s.Name)
		}
		k.p = p
	}
	var ok bool
	if k.decoder, ok = k.p.(interface {
		DecodeError(int, []byte) *adapters.Error
	}); !ok {
		t.Fatalf("%s has no DecodeError", s.Name)
	}
	t.Run("capabilities", k.capabilities)
	t.Run("owned", k.owned)
	t.Run("submit", k.submit)
	t.Run("poll", k.poll)
	t.Run("error", k.errors)
	t.Run("file", k.files)
	if !t.Failed() {
		t.Run("coverage", k.coverage)
	}
}

func (k *taskKit) dir(sub string) string { return filepath.Join(k.s.Testdata, "tasks", sub) }

func (k *taskKit) upstream(model string) *adapters.Upstream {
	if model == "" {
		model = "adaptertest-model"
	}
	return &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: k.s.Key, Model: model}
}

// fixtures calls fn with each fixture of a directory, decoded, and the
// golden it is checked against.
func (k *taskKit) fixtures(t *testing.T, sub string, fn func(t *testing.T, f *taskFixture, golden string)) {
	eachFixture(t, k.dir(sub), k.checked, func(t *testing.T, raw []byte, golden string) {
		var f taskFixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		fn(t, &f, golden)
	})
}

func (k *taskKit) capabilities(t *testing.T) {
	if got := k.p.CallbackCapable(); got != k.s.Callback {
		t.Errorf("CallbackCapable() = %v, the suite says %v", got, k.s.Callback)
	}
	if _, ok := k.p.(adapters.TaskFetcher); ok != k.s.Fetcher {
		t.Errorf("TaskFetcher: %v, the suite says %v", ok, k.s.Fetcher)
	}
}

// owned checks that each field the family owns is refused in metadata,
// with the field named and no upstream call made.
func (k *taskKit) owned(t *testing.T) {
	got := k.p.OwnedFields()
	if !slices.Equal(got, k.s.Owned) {
		t.Fatalf("OwnedFields() = %q, the suite says %q", got, k.s.Owned)
	}
	for _, field := range got {
		do := &recorder{}
		meta, _ := json.Marshal(map[string]any{field: 1})
		_, err := k.p.SubmitTask(context.Background(), do, k.upstream(""), &adapters.TaskRequest{Prompt: "a kite", Metadata: meta})
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Param != "metadata."+field {
			t.Errorf("metadata.%s: got %v, want a 400 naming metadata.%s", field, err, field)
		}
		if len(do.calls) != 0 {
			t.Errorf("metadata.%s: the family called the vendor before refusing it", field)
		}
	}
}

func (k *taskKit) submit(t *testing.T) {
	k.fixtures(t, "submit", func(t *testing.T, f *taskFixture, golden string) {
		if f.Request == nil {
			t.Fatal("a submit fixture needs a request")
		}
		req := f.Request.request()
		do := &recorder{answers: f.Answers}
		id, err := k.p.SubmitTask(context.Background(), do, k.upstream(f.Model), req)
		k.checkCalls(t, do)
		if req.CallbackURL != "" && err == nil {
			k.checkCallback(t, do, req.CallbackURL)
		}
		var out strings.Builder
		do.render(&out, k.s.Key)
		if err != nil {
			renderError(t, &out, err)
		} else {
			fmt.Fprintf(&out, "→ id %s\n", id)
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

func (k *taskKit) poll(t *testing.T) {
	k.fixtures(t, "poll", func(t *testing.T, f *taskFixture, golden string) {
		do := &recorder{answers: f.Answers}
		st, err := k.p.PollTask(context.Background(), do, k.upstream(f.Model), f.ID)
		k.checkCalls(t, do)
		var out strings.Builder
		do.render(&out, k.s.Key)
		if err != nil {
			if st != nil {
				t.Errorf("PollTask returned a state with its error: %+v", st)
			}
			fmt.Fprintf(&out, "→ error %v\n", err)
		} else {
			checkState(t, st)
			k.states[st.Status] = true
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintf(&out, "→ state %s\n", b)
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

func (k *taskKit) errors(t *testing.T) {
	checkErrors(t, k.dir("error"), k.checked, k.decoder.DecodeError)
}

func (k *taskKit) files(t *testing.T) {
	fetcher, ok := k.p.(adapters.TaskFetcher)
	k.fixtures(t, "file", func(t *testing.T, f *taskFixture, golden string) {
		if !ok {
			t.Fatal("a file fixture for a family that is no TaskFetcher")
		}
		if f.File == nil {
			t.Fatal("a file fixture needs a file")
		}
		hr, err := fetcher.FetchFile(context.Background(), k.upstream(f.Model), f.ID, *f.File)
		var out strings.Builder
		if err != nil {
			renderError(t, &out, err)
		} else {
			do := &recorder{answers: []answer{{Status: 200}}}
			_, _ = do.Do(hr)
			k.checkCalls(t, do)
			do.render(&out, k.s.Key)
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

// coverage asks the fixtures for the states and shapes every family has,
// and refuses goldens no fixture checked.
func (k *taskKit) coverage(t *testing.T) {
	for _, s := range []string{adapters.TaskFinished, adapters.TaskFailed} {
		if !k.states[s] {
			t.Errorf("no poll fixture reaches %s", s)
		}
	}
	if !k.states[adapters.TaskNotStarted] && !k.states[adapters.TaskRunning] {
		t.Errorf("no poll fixture reaches a task still pending")
	}
	for _, sub := range []string{"submit", "error"} {
		if fixtureCount(k.dir(sub)) == 0 {
			t.Errorf("no %s fixture in %s", sub, k.dir(sub))
		}
	}
	if k.s.Fetcher && fixtureCount(k.dir("file")) == 0 {
		t.Errorf("a TaskFetcher without a file fixture in %s", k.dir("file"))
	}
	uncheckedGoldens(t, k.checked, k.dir("submit"), k.dir("poll"), k.dir("error"), k.dir("file"))
}

// checkCalls holds the credential to its place: every call carries
// KeyHeader, and the key is in no other header, no URL and no body.
func (k *taskKit) checkCalls(t *testing.T, do *recorder) {
	t.Helper()
	checkKey(t, do, k.s.KeyHeader, k.s.Key)
}

// checkCallback: the vendor is given the client's callback URL byte for
// byte (no \u0026 for &).
func (k *taskKit) checkCallback(t *testing.T, do *recorder, url string) {
	t.Helper()
	if !k.s.Callback {
		return // the gateway refuses it before the family sees it
	}
	for _, c := range do.calls {
		if strings.Contains(string(c.body), url) {
			return
		}
	}
	t.Errorf("callback URL %q reached the vendor in no call as it was written", url)
}

// checkState holds a TaskState to what the task endpoint can report.
func checkState(t *testing.T, st *adapters.TaskState) {
	t.Helper()
	switch st.Status {
	case adapters.TaskNotStarted, adapters.TaskRunning, adapters.TaskFinished, adapters.TaskFailed:
	default:
		t.Errorf("status %q is none of the four", st.Status)
	}
	if st.Progress < 0 || st.Progress > 100 {
		t.Errorf("progress %d", st.Progress)
	}
	if st.Status == adapters.TaskFinished && (len(st.Files) == 0 || st.Progress != 100) {
		t.Errorf("a finished task without files or at %d%%: %+v", st.Progress, st)
	}
	if st.Status != adapters.TaskFinished && len(st.Files) != 0 {
		t.Errorf("files on a %s task", st.Status)
	}
	if (st.Status == adapters.TaskFailed) != (st.Error != "") {
		t.Errorf("a %s task with error %q", st.Status, st.Error)
	}
	for _, f := range st.Files {
		if !strings.HasPrefix(f.URL, "https://") && !strings.HasPrefix(f.URL, "http://") {
			t.Errorf("file URL %q is not absolute", f.URL)
		}
		switch f.Type {
		case adapters.FileImage, adapters.FileVideo, adapters.FileAudio, adapters.FileOther:
		default:
			t.Errorf("file type %q", f.Type)
		}
	}
}

// renderError writes an error as the gateway sees it: an *adapters.Error's
// fields, anything else (a vendor answer that breaks its shape) as text.
func renderError(t *testing.T, out *strings.Builder, err error) {
	t.Helper()
	var e *adapters.Error
	if !errors.As(err, &e) {
		fmt.Fprintf(out, "→ error %v\n", err)
		return
	}
	fault := "by status"
	if e.Fault == adapters.FaultChannel {
		fault = "channel"
	}
	fmt.Fprintf(out, "→ error %d %s", e.Status, e.Type)
	if e.Code != "" {
		fmt.Fprintf(out, " code=%s", e.Code)
	}
	if e.Param != "" {
		fmt.Fprintf(out, " param=%s", e.Param)
	}
	fmt.Fprintf(out, " fault=%s\n  %s\n", fault, e.Message)
}
