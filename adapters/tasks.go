package adapters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Task statuses, as the task endpoints report them.
const (
	TaskNotStarted = "not_started"
	TaskRunning    = "running"
	TaskFinished   = "finished"
	TaskFailed     = "failed"
)

// TaskTerminal reports whether status is final.
func TaskTerminal(status string) bool { return status == TaskFinished || status == TaskFailed }

// File types a finished task's files carry.
const (
	FileImage = "image"
	FileVideo = "video"
	FileAudio = "audio"
	FileOther = "other"
)

// TaskRequest is a client's job submission, decoded by the gateway from
// either body form of POST /api/generate/submit. The common generation
// fields are neutral; Metadata carries the vendor's own options unchanged.
type TaskRequest struct {
	Model  string // the model the client named (Upstream.Model is the vendor's name)
	Prompt string
	// Image is the first frame: an http(s) URL, a data: URL or bare base64.
	Image          string
	Duration       int    // seconds; 0 is the vendor's default
	AspectRatio    string // "16:9", ...
	Size           string // "1280x720", or the vendor's resolution name
	NegativePrompt string
	Seed           *int64
	// Metadata is the client's metadata object minus callback_url, a JSON
	// object (or nil): its members are merged into the vendor's native
	// submit body as they are. The gateway has already refused members it
	// owns (model); an adapter refuses those its own body owns as well
	// (via OwnedFields).
	Metadata json.RawMessage
	// CallbackURL is metadata.callback_url, already checked (absolute https,
	// not a loopback, private or link-local host); "" when none. A
	// callback-capable adapter puts it in the vendor's callback field as it
	// is; the gateway never calls it.
	CallbackURL string
}

// TaskFile is one output of a finished task.
type TaskFile struct {
	URL  string `json:"file_url"`
	Type string `json:"file_type"` // FileImage, FileVideo, FileAudio or FileOther
}

// TaskState is what the upstream says of a task at one poll.
type TaskState struct {
	Status   string // TaskNotStarted, TaskRunning, TaskFinished or TaskFailed
	Progress int    // 0..100
	Files    []TaskFile
	// Error is the vendor's reason when Status is TaskFailed.
	Error string
	// Seconds is the length of the video produced, when the vendor says; a
	// per-second price settles on it (else on the requested duration).
	Seconds float64
}

// TaskProvider is the task capability: a family that runs job-shaped
// generation (submit now, poll until done). It speaks HTTP itself through do, because
// some vendors need more than one call per step (a file id resolved to a
// download URL, a token signed from two keys).
type TaskProvider interface {
	// CallbackCapable reports whether the vendor accepts a callback URL;
	// the gateway refuses one for a family that does not.
	CallbackCapable() bool
	// OwnedFields names the members of the vendor's native body that a
	// client's metadata must not set (the model, or a field that changes
	// what is billed): the gateway refuses them with a 400 before any
	// call, and SubmitTask refuses them as well (RefuseOwned).
	OwnedFields() []string
	// SubmitTask sends the job and returns the vendor's id for it. A
	// vendor's refusal is an *Error carrying its status and reason.
	SubmitTask(ctx context.Context, do Doer, up *Upstream, t *TaskRequest) (upstreamID string, err error)
	// PollTask asks the vendor for the job's state. Files are the vendor's
	// URLs; when downloading them needs the channel's key, the provider is
	// a TaskFetcher and clients are given the gateway's own URLs instead.
	PollTask(ctx context.Context, do Doer, up *Upstream, upstreamID string) (*TaskState, error)
}

// TaskFetcher is optionally implemented by a TaskProvider whose finished
// files can only be downloaded with the channel's key; optional because
// most vendors hand out URLs anyone may fetch (OpenAI's video
// content, Gemini's file URIs). The gateway keeps the vendor's URL to
// itself, gives the client a URL of its own, and serves that to the task's
// owner by streaming the request FetchFile builds (the key set on it).
type TaskFetcher interface {
	FetchFile(ctx context.Context, up *Upstream, upstreamID string, file TaskFile) (*http.Request, error)
}

// Doer sends one upstream request (the channel's HTTP client, with its
// timeouts and bounds).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// TaskImageBytes returns a task's first-frame image as bytes, for a vendor
// that takes only inline images: a data: URL or bare base64 is decoded, an
// http(s) URL fetched within the gateway's image-fetch bounds (FetchImage).
// Errors are *Error 400s that say which form is expected.
func TaskImageBytes(ctx context.Context, image string) (*Image, error) {
	s := strings.TrimSpace(image)
	switch {
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		return FetchImage(ctx, s)
	case strings.HasPrefix(s, "data:"):
		meta, data, ok := strings.Cut(s[len("data:"):], ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 {
			return nil, BadRequest("image: a data URL must look like data:image/png;base64,<data>")
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, BadRequest("image: the data URL's base64 does not decode: %v", err)
		}
		if mediaType == "" {
			mediaType = http.DetectContentType(b)
		}
		return &Image{MediaType: mediaType, Data: b}, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, BadRequest("image must be an http(s) URL, a data: URL or base64 bytes")
	}
	mediaType := http.DetectContentType(b)
	if !strings.HasPrefix(mediaType, "image/") {
		return nil, BadRequest("image: the base64 bytes are not a PNG, JPEG, GIF or WebP image")
	}
	return &Image{MediaType: mediaType, Data: b}, nil
}

// MergeTaskMetadata sets every member of a client's metadata object on a
// vendor's JSON submit body (a JSON object), keeping the body's other
// members and the metadata's values byte for byte. A member the body sets
// already is replaced by the metadata's: the vendor's own options are the
// client's to choose, except those the adapter owns (OwnedFields),
// which the gateway refused before.
func MergeTaskMetadata(body []byte, metadata json.RawMessage) ([]byte, error) {
	if len(metadata) == 0 || string(metadata) == "null" {
		return body, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &members); err != nil {
		return nil, BadRequest("metadata must be a JSON object of the vendor's own options")
	}
	if len(members) == 0 {
		return body, nil
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a stable body for the same request
	fields := make([]Field, 0, len(keys))
	for _, k := range keys {
		fields = append(fields, Field{Key: k, Value: members[k]})
	}
	return SetFields(body, fields...)
}
