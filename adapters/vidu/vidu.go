// Package vidu is the Vidu video family (channel type "vidu"): Shengshu
// Vidu's enterprise task API, text-to-video at {base_url}/ent/v2/text2video
// and image-to-video at {base_url}/ent/v2/img2video, a task then read at
// {base_url}/ent/v2/tasks/{id}/creations, with the key in "Authorization:
// Token <key>". It has the task capability only, so no relayed operation
// reaches it. It registers the Caddy module gateway.adapters.vidu and must
// not import caddymodule or store.
package vidu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "vidu"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Vidu provider. It has no options.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters." + Name,
		New: func() caddy.Module { return new(Adapter) },
	}
}

// UnmarshalCaddyfile reads `type vidu`, which takes no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// errorBody is Vidu's error answer.
type errorBody struct {
	Code    any    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// DecodeError implements adapters.Provider: Vidu answers {code, reason,
// message}. A refused key, or an account without credits, is the
// channel's fault.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) != nil || (w.Message == "" && w.Reason == "") {
		e.Message = fmt.Sprintf("vidu answered HTTP %d", status)
		return e
	}
	e.Code, e.Message = w.Reason, w.Message
	if e.Message == "" {
		e.Message = w.Reason
	}
	if status == http.StatusUnauthorized || w.Reason == "CreditInsufficient" || w.Reason == "UnAuthorized" {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// CallbackCapable implements adapters.TaskProvider: Vidu takes
// callback_url on every creation endpoint.
func (Adapter) CallbackCapable() bool { return true }

// OwnedFields implements adapters.TaskProvider: the model, the image the
// gateway sends, and what Vidu's credits follow (length, resolution, the
// recommended-prompt surcharge, audio made with the video).
func (Adapter) OwnedFields() []string {
	return []string{"model", "images", "duration", "resolution", "is_rec", "audio"}
}

// submitBody is text2video's and img2video's body.
type submitBody struct {
	Model       string   `json:"model"`
	Images      []string `json:"images,omitempty"`
	Prompt      string   `json:"prompt,omitempty"`
	Duration    int      `json:"duration,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	AspectRatio string   `json:"aspect_ratio,omitempty"`
	Resolution  string   `json:"resolution,omitempty"`
	CallbackURL string   `json:"callback_url,omitempty"`
}

// resolutions Vidu names.
var resolutions = map[string]bool{"360p": true, "540p": true, "720p": true, "1080p": true}

// lengths are the video lengths each model makes, in seconds, as Vidu's
// API reference lists them. The reservation follows the duration asked
// for, and Vidu does not say how long a finished video is, so a length the
// model does not make would be charged for a video it is not.
var lengths = map[string][]int{
	"viduq3-pro": span(1, 16), "viduq3-turbo": span(1, 16),
	"viduq2": span(1, 10), "viduq2-pro": span(1, 10), "viduq2-turbo": span(1, 10),
	"viduq1": {5}, "viduq1-classic": {5},
	"vidu2.0": {4, 8}, "vidu1.5": {4, 8},
}

// unknownLengths holds a model not listed to Vidu's widest range.
var unknownLengths = span(1, 16)

func span(lo, hi int) []int {
	s := make([]int, 0, hi-lo+1)
	for d := lo; d <= hi; d++ {
		s = append(s, d)
	}
	return s
}

// checkDuration refuses a duration the model does not make.
func checkDuration(model string, d int) error {
	if d == 0 {
		return nil // the model's default, reserved as max_seconds
	}
	ls, ok := lengths[model]
	if !ok {
		ls = unknownLengths
	}
	if slices.Contains(ls, d) {
		return nil
	}
	var makes string
	switch n := len(ls); {
	case n == 1:
		makes = fmt.Sprintf("%d seconds only", ls[0])
	case n > 2 && ls[n-1]-ls[0] == n-1:
		makes = fmt.Sprintf("%d to %d seconds", ls[0], ls[n-1])
	default:
		words := make([]string, n)
		for i, l := range ls {
			words[i] = strconv.Itoa(l)
		}
		makes = strings.Join(words[:n-1], ", ") + " or " + words[n-1] + " seconds"
	}
	return adapters.BadRequest("vidu's %s makes videos of %s, not %d: set duration to a length it makes, or leave it out for its default", model, makes, d)
}

// SubmitTask implements adapters.TaskProvider.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), Name); err != nil {
		return "", err
	}
	if t.NegativePrompt != "" {
		return "", adapters.BadRequest("vidu takes no negative_prompt; describe what you want in the prompt instead")
	}
	if err := checkDuration(up.Model, t.Duration); err != nil {
		return "", err
	}
	body := submitBody{Model: up.Model, Prompt: t.Prompt, Duration: t.Duration, Seed: t.Seed, CallbackURL: t.CallbackURL}
	if t.Size != "" {
		r := strings.ToLower(t.Size)
		if !resolutions[r] {
			return "", adapters.BadRequest("vidu takes a resolution for size: 360p, 540p, 720p or 1080p, not %q", t.Size)
		}
		body.Resolution = r
	}
	path := "/ent/v2/text2video"
	if t.Image != "" {
		if t.AspectRatio != "" {
			return "", adapters.BadRequest("vidu's image-to-video takes the image's own aspect ratio; remove aspect_ratio")
		}
		img, err := adapters.TaskImageURL(t.Image)
		if err != nil {
			return "", err
		}
		path, body.Images = "/ent/v2/img2video", []string{img}
	} else {
		if t.Prompt == "" {
			return "", adapters.BadRequest("vidu's text-to-video needs a prompt")
		}
		body.AspectRatio = t.AspectRatio
	}
	raw, err := adapters.MarshalTaskBody(body)
	if err != nil {
		return "", err
	}
	if raw, err = adapters.MergeTaskMetadata(raw, t.Metadata); err != nil {
		return "", err
	}
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+path, raw, false)
	if err != nil {
		return "", err
	}
	var created struct {
		TaskID string `json:"task_id"`
		State  string `json:"state"`
	}
	if err := a.call(do, up, hr, "submitting the task", &created); err != nil {
		return "", err
	}
	if created.TaskID == "" {
		return "", fmt.Errorf("channel %q: vidu accepted the task without a task_id", up.Channel)
	}
	return created.TaskID, nil
}

// creations is a task query's answer.
type creations struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	ErrCode   string `json:"err_code"`
	Credits   int    `json:"credits"`
	Creations []struct {
		ID       string `json:"id"`
		URL      string `json:"url"`
		CoverURL string `json:"cover_url"`
	} `json:"creations"`
}

// PollTask implements adapters.TaskProvider.
func (a Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	hr, err := adapters.NewTaskGet(ctx, strings.TrimRight(up.BaseURL, "/")+"/ent/v2/tasks/"+url.PathEscape(upstreamID)+"/creations")
	if err != nil {
		return nil, err
	}
	var c creations
	if err := a.call(do, up, hr, "reading the task", &c); err != nil {
		return nil, err
	}
	st := &adapters.TaskState{}
	switch c.State {
	case "created", "queueing":
		st.Status = adapters.TaskNotStarted
	case "processing":
		st.Status = adapters.TaskRunning
	case "success":
		st.Status, st.Progress = adapters.TaskFinished, 100
		for _, v := range c.Creations {
			if v.URL != "" {
				st.Files = append(st.Files, adapters.TaskFile{URL: v.URL, Type: adapters.FileVideo})
			}
		}
		if len(st.Files) == 0 {
			return nil, fmt.Errorf("channel %q: vidu says task %s succeeded but gives no creation", up.Channel, upstreamID)
		}
	case "failed":
		st.Status, st.Error = adapters.TaskFailed, c.ErrCode
		if st.Error == "" {
			st.Error = "vidu failed the task without a reason"
		}
	default:
		return nil, fmt.Errorf("channel %q: vidu reports task %s as %q, a state it does not document", up.Channel, upstreamID, c.State)
	}
	return st, nil
}

// call sends hr with the key and decodes a successful answer into out.
func (a Adapter) call(do adapters.Doer, up *adapters.Upstream, hr *http.Request, what string, out any) error {
	hr.Header.Set("Authorization", "Token "+up.Key)
	_, body, err := adapters.TaskCallOK(do, up, hr, what, a.DecodeError)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("channel %q: %s: vidu's answer: %w", up.Channel, what, err)
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
