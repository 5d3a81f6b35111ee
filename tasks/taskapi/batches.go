package taskapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

// IsBatchPath reports whether a path is the Files or a Batch API's.
func IsBatchPath(p string) bool {
	for _, prefix := range []string{"/v1/files", "/v1/batches", "/v1/messages/batches"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// maxBatchCreate bounds an OpenAI batch's create body (a file id, an
// endpoint and some metadata).
const maxBatchCreate = 64 << 10

// ServeBatches answers the Files and Batch APIs for the caller, errors in
// the dialect d; the task engine keeps the files and runs the batches.
func (h *API) ServeBatches(w http.ResponseWriter, r *http.Request, d adapters.Dialect, id *keys.Identity) error {
	eng := h.Tasks
	ctx := r.Context()
	fail := func(e *adapters.Error) error { return engine.WriteError(w, d, e) }
	uid := id.User.ID
	p := r.URL.Path
	m := r.Method
	notAllowed := func(allow string) error {
		w.Header().Set("Allow", allow)
		return fail(adapters.Errorf(http.StatusMethodNotAllowed, adapters.ErrInvalidRequest, "%s takes %s", p, allow))
	}
	defer h.EnterDatabase()()

	if rest, ok := strings.CutPrefix(p, "/v1/messages/batches"); ok {
		return h.serveMessageBatches(w, r, d, id, strings.TrimPrefix(rest, "/"))
	}
	if rest, ok := strings.CutPrefix(p, "/v1/files"); ok {
		fileID, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		switch {
		case fileID == "" && m == http.MethodPost:
			return h.uploadFile(w, r, d, id)
		case fileID == "" && m == http.MethodGet:
			q := r.URL.Query()
			limit := listLimit(q.Get("limit"), 10000)
			fs, ae := eng.ListFiles(ctx, uid, q.Get("purpose"), q.Get("after"), limit+1)
			if ae != nil {
				return fail(ae)
			}
			return writeListPage(w, fs, limit, tasks.OpenAIList, func(f *store.File) (map[string]any, string) { return tasks.OpenAIFile(f), f.ID })
		case fileID == "":
			return notAllowed("GET, POST")
		case sub == "" && m == http.MethodGet:
			f, ae := eng.File(ctx, uid, fileID)
			if ae != nil {
				return fail(ae)
			}
			return writeJSONAnswer(w, http.StatusOK, tasks.OpenAIFile(f))
		case sub == "" && m == http.MethodDelete:
			if ae := eng.DeleteFile(ctx, uid, fileID); ae != nil {
				return fail(ae)
			}
			return writeJSONAnswer(w, http.StatusOK, map[string]any{"id": fileID, "object": "file", "deleted": true})
		case sub == "":
			return notAllowed("GET, DELETE")
		case sub == "content" && m == http.MethodGet:
			f, rd, ae := eng.OpenUserFile(ctx, uid, fileID)
			if ae != nil {
				return fail(ae)
			}
			defer rd.Close()
			return serveFileBytes(w, f, rd)
		}
		return fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "unknown endpoint %s %s", m, p))
	}
	// /v1/batches
	batchID, sub, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(p, "/v1/batches"), "/"), "/")
	switch {
	case batchID == "" && m == http.MethodPost:
		var body struct {
			InputFileID      string            `json:"input_file_id"`
			Endpoint         string            `json:"endpoint"`
			CompletionWindow string            `json:"completion_window"`
			Metadata         map[string]string `json:"metadata"`
		}
		if ae := h.readBatchBody(w, r, id, maxBatchCreate, &body); ae != nil {
			return h.RefuseUnread(w, r, func() error { return fail(ae) })
		}
		switch {
		case body.InputFileID == "":
			return fail(adapters.BadRequest("'input_file_id' is required: upload the requests with POST /v1/files (purpose \"batch\") and name the file's id"))
		case !slices.Contains(tasks.BatchEndpoints, body.Endpoint):
			return fail(adapters.BadRequest("'endpoint' must be one of %s, not %q", strings.Join(tasks.BatchEndpoints, ", "), body.Endpoint))
		case body.CompletionWindow != "" && body.CompletionWindow != "24h":
			return fail(adapters.BadRequest("'completion_window' must be \"24h\", not %q", body.CompletionWindow))
		}
		t, ae := eng.CreateBatch(ctx, tasks.BatchRequest{Identity: id, Dialect: tasks.DialectOpenAI, InputFileID: body.InputFileID,
			Endpoint: body.Endpoint, CompletionWindow: body.CompletionWindow, Metadata: body.Metadata,
			RequestID: h.RequestID(r), Start: time.Now(), Header: w.Header()})
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.OpenAIBatch(t))
	case batchID == "" && m == http.MethodGet:
		q := r.URL.Query()
		limit := listLimit(q.Get("limit"), 100)
		ts, ae := eng.Batches(ctx, uid, q.Get("after"), limit+1)
		if ae != nil {
			return fail(ae)
		}
		return writeListPage(w, ts, limit, tasks.OpenAIList, func(t *store.Task) (map[string]any, string) { return tasks.OpenAIBatch(t), t.ID })
	case batchID == "":
		return notAllowed("GET, POST")
	case sub == "" && m == http.MethodGet:
		t, ae := eng.Batch(ctx, uid, batchID)
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.OpenAIBatch(t))
	case sub == "cancel" && m == http.MethodPost:
		t, ae := eng.CancelBatch(ctx, uid, batchID)
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.OpenAIBatch(t))
	}
	return fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "unknown endpoint %s %s", m, p))
}

// serveMessageBatches answers Anthropic's Message Batches API; rest is
// the path after /v1/messages/batches/.
func (h *API) serveMessageBatches(w http.ResponseWriter, r *http.Request, d adapters.Dialect, id *keys.Identity, rest string) error {
	eng := h.Tasks
	ctx := r.Context()
	fail := func(e *adapters.Error) error { return engine.WriteError(w, d, e) }
	uid := id.User.ID
	m := r.Method
	base := "http://" + r.Host
	if r.TLS != nil {
		base = "https://" + r.Host
	}
	batchID, sub, _ := strings.Cut(rest, "/")
	switch {
	case batchID == "" && m == http.MethodPost:
		var body struct {
			Requests []struct {
				CustomID string          `json:"custom_id"`
				Params   json.RawMessage `json:"params"`
			} `json:"requests"`
		}
		if ae := h.readBatchBody(w, r, id, eng.MaxFile(), &body); ae != nil {
			return h.RefuseUnread(w, r, func() error { return fail(ae) })
		}
		lines := make([]adapters.BatchLine, len(body.Requests))
		for i, rq := range body.Requests {
			lines[i] = adapters.BatchLine{CustomID: rq.CustomID, Body: rq.Params}
		}
		t, ae := eng.CreateBatch(ctx, tasks.BatchRequest{Identity: id, Dialect: tasks.DialectAnthropic, Lines: lines,
			RequestID: h.RequestID(r), Start: time.Now(), Header: w.Header()})
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.AnthropicBatch(t, base))
	case batchID == "" && m == http.MethodGet:
		q := r.URL.Query()
		limit := listLimit(q.Get("limit"), 1000)
		ts, ae := eng.Batches(ctx, uid, q.Get("after_id"), limit+1)
		if ae != nil {
			return fail(ae)
		}
		return writeListPage(w, ts, limit, tasks.AnthropicList, func(t *store.Task) (map[string]any, string) { return tasks.AnthropicBatch(t, base), t.ID })
	case sub == "" && m == http.MethodGet:
		t, ae := eng.Batch(ctx, uid, batchID)
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.AnthropicBatch(t, base))
	case sub == "cancel" && m == http.MethodPost:
		t, ae := eng.CancelBatch(ctx, uid, batchID)
		if ae != nil {
			return fail(ae)
		}
		return writeJSONAnswer(w, http.StatusOK, tasks.AnthropicBatch(t, base))
	case sub == "results" && m == http.MethodGet:
		t, ae := eng.Batch(ctx, uid, batchID)
		if ae != nil {
			return fail(ae)
		}
		fileID := tasks.BatchResultsFile(t)
		if fileID == "" {
			return fail(adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest, "the message batch %s has not ended yet: its results are ready when processing_status is \"ended\"", batchID))
		}
		f, rd, ae := eng.OpenUserFile(ctx, uid, fileID)
		if ae != nil {
			return fail(ae)
		}
		defer rd.Close()
		w.Header().Set("Content-Type", "application/x-jsonl")
		w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
		w.WriteHeader(http.StatusOK)
		_, err := io.Copy(w, rd)
		return err
	}
	return fail(adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest, "unknown endpoint %s %s", m, r.URL.Path))
}

// uploadFile stores a multipart upload (file and purpose, in either
// order) for the caller. A body larger than max_file_size is refused
// from its Content-Length before it is read, or as soon as it passes it.
func (h *API) uploadFile(w http.ResponseWriter, r *http.Request, d adapters.Dialect, id *keys.Identity) error {
	eng := h.Tasks
	fail := func(e *adapters.Error) error { return engine.WriteError(w, d, e) }
	refuse := func(e *adapters.Error) error { return h.RefuseUnread(w, r, func() error { return fail(e) }) }
	// the multipart framing around the file is small
	limit := eng.MaxFile() + 64<<10
	if r.ContentLength > limit {
		ae := adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrInvalidRequest,
			"the file is larger than %d bytes, the largest this gateway keeps (batches max_file_size): split it", eng.MaxFile())
		ae.Code = "file_too_large"
		return refuse(ae)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		return refuse(adapters.BadRequest("POST /v1/files takes multipart/form-data with a 'file' and a 'purpose'"))
	}
	var purpose, filename string
	var sp *tasks.Spooled
	defer func() {
		if sp != nil {
			sp.Discard()
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return fail(adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrInvalidRequest, "the file is larger than %d bytes, the largest this gateway keeps (batches max_file_size)", eng.MaxFile()))
			}
			return fail(adapters.BadRequest("the multipart body could not be read: %v", err))
		}
		switch part.FormName() {
		case "purpose":
			b, _ := io.ReadAll(io.LimitReader(part, 256))
			purpose = strings.TrimSpace(string(b))
		case "file":
			if sp != nil {
				return fail(adapters.BadRequest("the upload has two 'file' parts: send one file per request"))
			}
			filename = filepath.Base(part.FileName())
			var ae *adapters.Error
			if sp, ae = eng.SpoolFile(part); ae != nil {
				return refuse(ae)
			}
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(part, 1<<20))
		}
	}
	switch {
	case sp == nil:
		return fail(adapters.BadRequest("'file' is required: the multipart part holding the file's bytes"))
	case purpose == "":
		return fail(adapters.BadRequest("'purpose' is required, e.g. \"batch\""))
	}
	f, ae := eng.Keep(r.Context(), sp, tasks.Upload{UserID: id.User.ID, Purpose: purpose, Filename: filename})
	if ae != nil {
		return fail(ae)
	}
	return writeJSONAnswer(w, http.StatusOK, tasks.OpenAIFile(f))
}

// serveFileBytes answers a file's content.
func serveFileBytes(w http.ResponseWriter, f *store.File, rd *os.File) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, rd)
	return err
}

// readBatchBody reads a JSON body of at most max bytes into dst within
// the process's body budget (held while it is decoded, shared per key and
// address as every model request's is).
func (h *API) readBatchBody(w http.ResponseWriter, r *http.Request, id *keys.Identity, limit int64, dst any) *adapters.Error {
	body, held, err := h.Bodies.ReadRequest(r, limit, h.BodyOwner(r, id))
	defer h.Bodies.Give(held)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than %d bytes, the most this endpoint takes (batches max_file_size for a message batch)", limit)
	case bodies.Busy(err):
		return h.BodyBusy(err, w.Header())
	case err != nil:
		return h.BodyReadError(r, err)
	}
	// a message batch's requests are one array of up to max_lines
	if e := adapters.PreScan(body, max(h.MaxElements, h.Tasks.MaxLines()+1)); e != nil {
		return e
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return adapters.BadRequest("the body is not the expected JSON: %v", err)
	}
	return nil
}

// listLimit reads a list's limit: 20 by default, at most max.
func listLimit(s string, max int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 20
	}
	return min(n, max)
}

// writeListPage answers a list page read with one row more than limit,
// whose presence says there are more: list is the dialect's envelope,
// shape an item's object and id.
func writeListPage[T any](w http.ResponseWriter, got []T, limit int,
	list func(items []map[string]any, ids []string, more bool) map[string]any, shape func(T) (map[string]any, string)) error {
	more := len(got) > limit
	got = got[:min(len(got), limit)]
	items, ids := make([]map[string]any, len(got)), make([]string, len(got))
	for i, x := range got {
		items[i], ids[i] = shape(x)
	}
	return writeJSONAnswer(w, http.StatusOK, list(items, ids, more))
}

// writeJSONAnswer answers v as JSON with status.
func writeJSONAnswer(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
