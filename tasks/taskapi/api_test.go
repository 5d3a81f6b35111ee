package taskapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/internal/serverside"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// rig is an API on a task engine over a SQLite store, for one user, with
// the database hold counted.
type rig struct {
	api    *API
	id     *keys.Identity
	held   int // EnterDatabase calls not yet left
	unread int // RefuseUnread calls
}

func newRig(t *testing.T, cfg tasks.Config) *rig {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	u := &store.User{Username: "ada", PasswordHash: "x", Quota: 10_000_000}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{UserID: u.ID, Name: "k", KeyHash: "hash-k", KeyPrefix: "sk-ha"}
	if err := st.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	cfg.BatchDir = filepath.Join(t.TempDir(), "files")
	r := &rig{id: &keys.Identity{User: u, Token: tok}}
	r.api = New(Config{
		Tasks:       tasks.New(cfg, tasks.Deps{Store: st, Engine: &engine.Engine{}}),
		Bodies:      bodies.NewBudget(bodies.Limits{Total: 1 << 20, PerKey: 1 << 20, PerAddress: 1 << 20}),
		MaxElements: 1000,
		TaskDialect: tasks.Dialect{},
		Request: serverside.Request{EnterDatabase: func() func() {
			r.held++
			return func() { r.held-- }
		}},
		RefuseUnread: func(_ http.ResponseWriter, _ *http.Request, answer func() error) error {
			r.unread++
			return answer()
		},
	})
	return r
}

// do serves one Files or Batch API request, errors in the task shape.
func (r *rig) do(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	if err := r.api.ServeBatches(w, req, tasks.Dialect{}, r.id); err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	if r.held != 0 {
		t.Fatalf("%s %s: the database is still held %d times", req.Method, req.URL.Path, r.held)
	}
	return w
}

func upload(t *testing.T, purpose, name, content string) *http.Request {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if err := mw.WriteField("purpose", purpose); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(fw, content)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/files", &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return req
}

func decode(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
}

// A file goes up, is listed, read back byte for byte and deleted through
// the API alone, holding the database while it does.
func TestFilesRoundTrip(t *testing.T) {
	r := newRig(t, tasks.Config{})
	content := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}` + "\n"
	var f struct {
		ID, Object, Purpose, Filename string
		Bytes                         int64
	}
	decode(t, r.do(t, upload(t, "batch", "in.jsonl", content)), &f)
	if f.ID == "" || f.Object != "file" || f.Purpose != "batch" || f.Filename != "in.jsonl" || f.Bytes != int64(len(content)) {
		t.Fatalf("uploaded: %+v", f)
	}
	var list struct {
		Data    []struct{ ID string }
		HasMore bool `json:"has_more"`
	}
	decode(t, r.do(t, httptest.NewRequest(http.MethodGet, "/v1/files?purpose=batch", nil)), &list)
	if len(list.Data) != 1 || list.Data[0].ID != f.ID || list.HasMore {
		t.Fatalf("listed: %+v", list)
	}
	w := r.do(t, httptest.NewRequest(http.MethodGet, "/v1/files/"+f.ID+"/content", nil))
	if w.Code != http.StatusOK || w.Body.String() != content || w.Header().Get("Content-Length") != strconv.Itoa(len(content)) {
		t.Fatalf("content: %d %q %v", w.Code, w.Body, w.Header())
	}
	var del struct {
		ID      string
		Deleted bool
	}
	decode(t, r.do(t, httptest.NewRequest(http.MethodDelete, "/v1/files/"+f.ID, nil)), &del)
	if del.ID != f.ID || !del.Deleted {
		t.Fatalf("deleted: %+v", del)
	}
	if w := r.do(t, httptest.NewRequest(http.MethodGet, "/v1/files/"+f.ID, nil)); w.Code != http.StatusNotFound {
		t.Fatalf("a deleted file: %d %s", w.Code, w.Body)
	}
}

// taskError is the task shape's error body (tasks.Dialect).
type taskError struct {
	Code  int
	Error struct{ Message, Type string }
}

// Wrong methods and unknown paths are refused in the caller's dialect,
// with Allow on a 405, before the engine is asked anything.
func TestBatchPathsRefused(t *testing.T) {
	r := newRig(t, tasks.Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		allow, want  string
	}{
		{http.MethodPut, "/v1/files", 405, "GET, POST", "takes GET, POST"},
		{http.MethodPost, "/v1/files/file-x", 405, "GET, DELETE", "takes GET, DELETE"},
		{http.MethodDelete, "/v1/files/file-x/content", 404, "", "unknown endpoint DELETE /v1/files/file-x/content"},
		{http.MethodDelete, "/v1/batches", 405, "GET, POST", "takes GET, POST"},
		{http.MethodGet, "/v1/batches/batch_x/results", 404, "", "unknown endpoint GET"},
		{http.MethodPut, "/v1/messages/batches/msgbatch_x", 404, "", "unknown endpoint PUT"},
		{http.MethodGet, "/v1/batches/batch_x", 404, "", ""},
		{http.MethodGet, "/v1/files/file-x", 404, "", ""},
	} {
		w := r.do(t, httptest.NewRequest(tc.method, tc.path, nil))
		var e taskError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tc.status || e.Code != tc.status || w.Header().Get("Allow") != tc.allow || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s %s: %d Allow %q %s; want %d Allow %q saying %q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), w.Body, tc.status, tc.allow, tc.want)
		}
	}
}

// A body past its endpoint's bound is refused with a 413 and answered as
// unread (RefuseUnread): a batch's create body, an upload by its length.
func TestBatchBodiesBounded(t *testing.T) {
	r := newRig(t, tasks.Config{MaxBatchFile: 1000})
	big := `{"input_file_id":"` + strings.Repeat("x", maxBatchCreate) + `"}`
	w := r.do(t, httptest.NewRequest(http.MethodPost, "/v1/batches", strings.NewReader(big)))
	if w.Code != http.StatusRequestEntityTooLarge || r.unread != 1 {
		t.Fatalf("a create body of %d bytes: %d %s, refused unread %d times", len(big), w.Code, w.Body, r.unread)
	}
	req := upload(t, "batch", "in.jsonl", strings.Repeat("x", 1000+64<<10+1))
	w = r.do(t, req)
	if w.Code != http.StatusRequestEntityTooLarge || r.unread != 2 || !strings.Contains(w.Body.String(), "larger than 1000 bytes") {
		t.Fatalf("an upload of %d bytes: %d %s, refused unread %d times", req.ContentLength, w.Code, w.Body, r.unread)
	}
	w = r.do(t, httptest.NewRequest(http.MethodPost, "/v1/batches", strings.NewReader(`{"endpoint":"/v1/chat/completions"}`)))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "'input_file_id' is required") {
		t.Fatalf("a create body without its file: %d %s", w.Code, w.Body)
	}
}

// The task endpoints take their methods, and answer others in the task
// shape.
func TestTaskPathsRefused(t *testing.T) {
	r := newRig(t, tasks.Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, tasks.SubmitPath, 405, http.MethodPost},
		{http.MethodPost, tasks.StatusPrefix + "task_x", 405, http.MethodGet},
		{http.MethodDelete, tasks.FilePrefix + "task_x/0", 405, http.MethodGet},
		{http.MethodGet, "/api/generate/other", 404, ""},
		{http.MethodGet, tasks.FilePrefix + "task_x", 404, ""},
	} {
		w := httptest.NewRecorder()
		if err := r.api.ServeTask(w, httptest.NewRequest(tc.method, tc.path, nil), r.id); err != nil {
			t.Fatal(err)
		}
		var e taskError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != tc.status || e.Code != tc.status || w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q %s; want %d Allow %q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), w.Body, tc.status, tc.allow)
		}
	}
}

// A task request no key was checked for (gateway_tasks before
// gateway_auth) is refused in the task shape, saying what to reorder.
func TestTaskWithoutIdentity(t *testing.T) {
	r := newRig(t, tasks.Config{})
	w := httptest.NewRecorder()
	if err := r.api.ServeTask(w, httptest.NewRequest(http.MethodPost, tasks.SubmitPath, nil), nil); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "put gateway_auth before gateway_tasks") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestListLimit(t *testing.T) {
	for _, tc := range []struct {
		s         string
		max, want int
	}{{"", 100, 20}, {"x", 100, 20}, {"0", 100, 20}, {"-3", 100, 20}, {"7", 100, 7}, {"500", 100, 100}} {
		if got := listLimit(tc.s, tc.max); got != tc.want {
			t.Errorf("listLimit(%q, %d) = %d, want %d", tc.s, tc.max, got, tc.want)
		}
	}
}
