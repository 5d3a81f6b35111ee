// Package seedance is the Seedance video family (channel type "seedance"):
// ByteDance's video models on the Ark task API, as Volcengine Ark
// (https://ark.cn-beijing.volces.com) and BytePlus ModelArk
// (https://ark.ap-southeast.bytepluses.com) both serve it; the channel's
// base_url says which. A job is POSTed to
// {base_url}/api/v3/contents/generations/tasks as a content list (the prompt
// as text, the first frame as image_url) and read back at .../tasks/{id},
// with the key as a Bearer token. It has the task capability only, so no
// relayed operation reaches it. It registers the Caddy module
// gateway.adapters.seedance and must not import caddymodule or store.
package seedance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "seedance"

const tasksPath = "/api/v3/contents/generations/tasks"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Seedance provider. It has no options: Volcengine Ark and
// BytePlus ModelArk differ only in their base URL.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters." + Name,
		New: func() caddy.Module { return new(Adapter) },
	}
}

// UnmarshalCaddyfile reads `type seedance`, which takes no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// errorBody is Ark's error answer.
type errorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
		Type    string `json:"type"`
	} `json:"error"`
}

// DecodeError implements adapters.Provider: Ark's {"error": {code,
// message, param, type}}. A refused key, an overdue account or a model the
// account has not enabled is the channel's fault.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) != nil || w.Error == nil || w.Error.Message == "" {
		e.Message = fmt.Sprintf("seedance answered HTTP %d", status)
		return e
	}
	e.Code, e.Message, e.Param = w.Error.Code, w.Error.Message, w.Error.Param
	switch {
	case status == http.StatusUnauthorized, strings.HasPrefix(w.Error.Code, "AuthenticationError"),
		strings.HasPrefix(w.Error.Code, "AccountOverdue"), w.Error.Code == "ModelNotOpen", w.Error.Code == "AccessDenied":
		e.Fault = adapters.FaultChannel
	}
	return e
}

// CallbackCapable implements adapters.TaskProvider: Ark takes
// callback_url.
func (Adapter) CallbackCapable() bool { return true }

// OwnedFields implements adapters.TaskProvider: the model, the content
// the gateway builds from the prompt and image, and what the price follows
// (length and resolution, which Ark bills by the tokens they make, and
// audio made with the video).
func (Adapter) OwnedFields() []string {
	return []string{"model", "content", "duration", "frames", "resolution", "generate_audio"}
}

type contentItem struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	Role     string    `json:"role,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type submitBody struct {
	Model       string        `json:"model"`
	Content     []contentItem `json:"content"`
	CallbackURL string        `json:"callback_url,omitempty"`
}

// billedCommand is a text command that sets the video's length or
// resolution, which the gateway's price follows.
var billedCommand = regexp.MustCompile(`(?i)(^|\s)--(duration|dur|frames|resolution|rs)\b`)

// resolutions Ark names.
var resolutions = map[string]bool{"480p": true, "720p": true, "1080p": true}

// SubmitTask implements adapters.TaskProvider. The length, ratio,
// resolution and seed go as the model's text commands after the prompt
// (--duration 5 --ratio 16:9), the form every Seedance model reads.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), Name); err != nil {
		return "", err
	}
	if t.NegativePrompt != "" {
		return "", adapters.BadRequest("seedance takes no negative_prompt; describe what you want in the prompt instead")
	}
	if m := billedCommand.FindString(t.Prompt); m != "" {
		// a text command in the prompt would set what the price follows
		return "", adapters.BadRequest("the prompt sets %q, a seedance text command for what is billed; give duration and size as the request's own fields", strings.TrimSpace(m))
	}
	model := strings.ToLower(up.Model)
	switch {
	case t.Image != "" && strings.Contains(model, "-t2v"):
		return "", adapters.BadRequest("model %s makes video from text only; remove image or use an image-to-video model", up.Model)
	case t.Image == "" && strings.Contains(model, "-i2v"):
		return "", adapters.BadRequest("model %s makes video from a first-frame image; give image", up.Model)
	case t.Image == "" && t.Prompt == "":
		return "", adapters.BadRequest("seedance needs a prompt or a first-frame image")
	}
	var commands []string
	if t.Duration != 0 {
		if t.Duration < 2 || t.Duration > 12 {
			return "", adapters.BadRequest("seedance makes videos of 2 to 12 seconds, not %d", t.Duration)
		}
		commands = append(commands, "--duration "+strconv.Itoa(t.Duration))
	}
	if t.AspectRatio != "" {
		if strings.ContainsAny(t.AspectRatio, " -") {
			return "", adapters.BadRequest("aspect_ratio %q is not a ratio such as 16:9", t.AspectRatio)
		}
		commands = append(commands, "--ratio "+t.AspectRatio)
	}
	if t.Size != "" {
		r := strings.ToLower(t.Size)
		if !resolutions[r] {
			return "", adapters.BadRequest("seedance takes a resolution for size: 480p, 720p or 1080p, not %q", t.Size)
		}
		commands = append(commands, "--resolution "+r)
	}
	if t.Seed != nil {
		commands = append(commands, "--seed "+strconv.FormatInt(*t.Seed, 10))
	}
	text := strings.TrimSpace(strings.Join(append([]string{t.Prompt}, commands...), " "))
	body := submitBody{Model: up.Model, CallbackURL: t.CallbackURL}
	if text != "" {
		body.Content = append(body.Content, contentItem{Type: "text", Text: text})
	}
	if t.Image != "" {
		img, err := adapters.TaskImageURL(t.Image)
		if err != nil {
			return "", err
		}
		body.Content = append(body.Content, contentItem{Type: "image_url", ImageURL: &imageURL{URL: img}, Role: "first_frame"})
	}
	raw, err := adapters.MarshalTaskBody(body)
	if err != nil {
		return "", err
	}
	if raw, err = adapters.MergeTaskMetadata(raw, t.Metadata); err != nil {
		return "", err
	}
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+tasksPath, raw, false)
	if err != nil {
		return "", err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := a.call(do, up, hr, "submitting the task", &created); err != nil {
		return "", err
	}
	if created.ID == "" {
		return "", fmt.Errorf("channel %q: seedance accepted the task without an id", up.Channel)
	}
	return created.ID, nil
}

// task is a task query's answer.
type task struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Content struct {
		VideoURL     string `json:"video_url"`
		LastFrameURL string `json:"last_frame_url"`
	} `json:"content"`
	Duration        float64 `json:"duration"`
	Frames          float64 `json:"frames"`
	FramesPerSecond float64 `json:"framespersecond"`
}

// PollTask implements adapters.TaskProvider.
func (a Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	hr, err := adapters.NewTaskGet(ctx, strings.TrimRight(up.BaseURL, "/")+tasksPath+"/"+url.PathEscape(upstreamID))
	if err != nil {
		return nil, err
	}
	var tk task
	if err := a.call(do, up, hr, "reading the task", &tk); err != nil {
		return nil, err
	}
	st := &adapters.TaskState{}
	switch tk.Status {
	case "queued":
		st.Status = adapters.TaskNotStarted
	case "running":
		st.Status = adapters.TaskRunning
	case "succeeded":
		if tk.Content.VideoURL == "" {
			return nil, fmt.Errorf("channel %q: seedance says task %s succeeded but gives no video_url", up.Channel, upstreamID)
		}
		st.Status, st.Progress = adapters.TaskFinished, 100
		st.Files = []adapters.TaskFile{{URL: tk.Content.VideoURL, Type: adapters.FileVideo}}
		if tk.Content.LastFrameURL != "" {
			st.Files = append(st.Files, adapters.TaskFile{URL: tk.Content.LastFrameURL, Type: adapters.FileImage})
		}
		st.Seconds = tk.Duration
		if st.Seconds == 0 && tk.Frames > 0 && tk.FramesPerSecond > 0 {
			st.Seconds = tk.Frames / tk.FramesPerSecond
		}
	case "failed":
		st.Status, st.Error = adapters.TaskFailed, "seedance failed the task without a reason"
		if tk.Error != nil && tk.Error.Message != "" {
			st.Error = tk.Error.Message
		}
	case "cancelled":
		st.Status, st.Error = adapters.TaskFailed, "the task was cancelled at seedance"
	default:
		return nil, fmt.Errorf("channel %q: seedance reports task %s as %q, a status it does not document", up.Channel, upstreamID, tk.Status)
	}
	return st, nil
}

// call sends hr with the key and decodes a successful answer into out.
func (a Adapter) call(do adapters.Doer, up *adapters.Upstream, hr *http.Request, what string, out any) error {
	hr.Header.Set("Authorization", "Bearer "+up.Key)
	_, body, err := adapters.TaskCallOK(do, up, hr, what, a.DecodeError)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("channel %q: %s: seedance's answer: %w", up.Channel, what, err)
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Module          = (*Adapter)(nil)
	_ caddyfile.Unmarshaler = (*Adapter)(nil)
	_ adapters.Provider     = (*Adapter)(nil)
	_ adapters.TaskProvider = (*Adapter)(nil)
)
