package tasks

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

// The task endpoints' paths.
const (
	PathPrefix   = "/api/generate/"
	SubmitPath   = "/api/generate/submit"
	StatusPrefix = "/api/generate/status/"
	FilePrefix   = "/api/generate/file/"
)

// IsPath reports whether a path is a task endpoint's, whose errors take
// the task shape.
func IsPath(p string) bool { return strings.HasPrefix(p, PathPrefix) }

// Dialect is how the task endpoints speak: the wrapped (fallback, OpenAI's)
// dialect's Bearer credential, and errors in the task shape
// {"code": <status>, "error": {"message", "type"}}.
type Dialect struct{ adapters.Dialect }

// Name names the dialect.
func (Dialect) Name() string { return "task" }

// EncodeError writes e in the task shape.
func (Dialect) EncodeError(e *adapters.Error) []byte {
	b, _ := json.Marshal(errorBody{Code: e.Status, Error: errorDetail{Message: e.Message, Type: string(e.Type)}})
	return b
}

type errorBody struct {
	Code  int         `json:"code"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// DataBody is a successful answer's body: {"code": 200, "data": data}.
func DataBody(data any) ([]byte, error) {
	return json.Marshal(map[string]any{"code": http.StatusOK, "data": data})
}

// FormatTime is how the task endpoints write times: UTC, to the second.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }

var _ adapters.Dialect = Dialect{}

// SubmittedData is the data of a submit's answer.
func SubmittedData(t *store.Task) map[string]any {
	return map[string]any{"task_id": t.ID, "status": adapters.TaskNotStarted, "created_time": FormatTime(t.CreatedAt)}
}

// StatusData is the data of a status call's answer, files as the client
// is shown them (Engine.ClientFiles).
func StatusData(t *store.Task, files []adapters.TaskFile) map[string]any {
	data := map[string]any{
		"task_id":      t.ID,
		"model":        t.Model,
		"status":       t.Status,
		"progress":     t.Progress,
		"files":        files,
		"created_time": FormatTime(t.CreatedAt),
	}
	if !t.FinishedAt.IsZero() {
		data["finished_time"] = FormatTime(t.FinishedAt)
	}
	if t.Status == adapters.TaskFailed {
		data["error_message"] = t.Error
	}
	return data
}
