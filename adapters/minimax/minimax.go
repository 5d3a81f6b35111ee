// Package minimax is the MiniMax Hailuo video family (channel type
// "minimax"): a job is POSTed to {base_url}/v1/video_generation, read at
// {base_url}/v1/query/video_generation?task_id=..., and a finished job's
// file id resolved to a download URL at
// {base_url}/v1/files/retrieve?file_id=..., with the key as a Bearer token.
// MiniMax answers HTTP 200 with base_resp {status_code, status_msg} and says
// refusals in status_code. It has the task capability only, so no relayed
// operation reaches it. It registers the Caddy module
// gateway.adapters.minimax and must not import caddymodule or store.
package minimax

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "minimax"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the MiniMax provider.
type Adapter struct {
	// GroupID is sent as GroupId with each file lookup, for accounts whose
	// API still asks for it; empty, none is sent.
	GroupID string `json:"group_id,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters." + Name,
		New: func() caddy.Module { return new(Adapter) },
	}
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type minimax {
//		group_id <id>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		if opt != "group_id" {
			return d.Errf("unrecognized minimax adapter option %q (it takes group_id)", opt)
		}
		a.GroupID = v
		return nil
	})
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// baseResp is MiniMax's verdict on every call.
type baseResp struct {
	StatusCode int    `json:"status_code"`
	StatusMsg  string `json:"status_msg"`
}

// DecodeError implements adapters.Provider.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	var w struct {
		BaseResp *baseResp `json:"base_resp"`
	}
	if json.Unmarshal(body, &w) != nil || w.BaseResp == nil || w.BaseResp.StatusCode == 0 {
		return &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status), Message: fmt.Sprintf("minimax answered HTTP %d", status)}
	}
	return codeError(status, w.BaseResp)
}

// codeError maps MiniMax's status codes: 1004 and 2049 are a refused key,
// 1008 an account without balance (the channel's fault); 1002 and 1039
// rate limits; 1026 and 1027 sensitive content and 2013 bad parameters
// (the request's); 1000, 1001 and 1013 its own errors.
func codeError(status int, br *baseResp) *adapters.Error {
	e := &adapters.Error{Code: fmt.Sprint(br.StatusCode), Message: br.StatusMsg}
	switch br.StatusCode {
	case 1004, 2049:
		e.Status, e.Fault = http.StatusUnauthorized, adapters.FaultChannel
	case 1008:
		e.Status, e.Fault = http.StatusPaymentRequired, adapters.FaultChannel
	case 1002, 1039:
		e.Status = http.StatusTooManyRequests
	case 1000, 1001, 1013:
		e.Status = http.StatusBadGateway
	default:
		e.Status = http.StatusBadRequest
	}
	if status >= 400 && status != http.StatusOK {
		e.Status = status
	}
	e.Type = adapters.ErrorTypeForStatus(e.Status)
	if e.Message == "" {
		e.Message = fmt.Sprintf("minimax refused the task (status_code %d)", br.StatusCode)
	}
	return e
}

// CallbackCapable implements adapters.TaskProvider: MiniMax takes
// callback_url.
func (Adapter) CallbackCapable() bool { return true }

// OwnedFields implements adapters.TaskProvider: the model, the first
// frame the gateway sends, and what the price follows (length and
// resolution).
func (Adapter) OwnedFields() []string {
	return []string{"model", "first_frame_image", "duration", "resolution"}
}

type submitBody struct {
	Model           string `json:"model"`
	Prompt          string `json:"prompt,omitempty"`
	FirstFrameImage string `json:"first_frame_image,omitempty"`
	Duration        int    `json:"duration,omitempty"`
	Resolution      string `json:"resolution,omitempty"`
	CallbackURL     string `json:"callback_url,omitempty"`
}

// SubmitTask implements adapters.TaskProvider.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), Name); err != nil {
		return "", err
	}
	switch {
	case t.NegativePrompt != "":
		return "", adapters.BadRequest("minimax takes no negative_prompt; describe what you want in the prompt instead")
	case t.Seed != nil:
		return "", adapters.BadRequest("minimax takes no seed; remove seed")
	case t.AspectRatio != "":
		return "", adapters.BadRequest("minimax takes no aspect_ratio; give size as a resolution (512P, 768P or 1080P)")
	case t.Duration != 0 && t.Duration != 6 && t.Duration != 10:
		return "", adapters.BadRequest("minimax makes videos of 6 or 10 seconds, not %d", t.Duration)
	case t.Prompt == "" && t.Image == "":
		return "", adapters.BadRequest("minimax needs a prompt or a first-frame image")
	}
	body := submitBody{Model: up.Model, Prompt: t.Prompt, Duration: t.Duration, CallbackURL: t.CallbackURL}
	if t.Size != "" {
		r := strings.ToUpper(t.Size)
		if r != "512P" && r != "768P" && r != "1080P" {
			return "", adapters.BadRequest("minimax takes a resolution for size: 512P, 768P or 1080P, not %q", t.Size)
		}
		body.Resolution = r
	}
	if t.Image != "" {
		img, err := adapters.TaskImageURL(t.Image)
		if err != nil {
			return "", err
		}
		body.FirstFrameImage = img
	}
	raw, err := adapters.MarshalTaskBody(body)
	if err != nil {
		return "", err
	}
	if raw, err = adapters.MergeTaskMetadata(raw, t.Metadata); err != nil {
		return "", err
	}
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+"/v1/video_generation", raw, false)
	if err != nil {
		return "", err
	}
	var created struct {
		TaskID string `json:"task_id"`
	}
	if err := a.call(do, up, hr, "submitting the task", &created); err != nil {
		return "", err
	}
	if created.TaskID == "" {
		return "", fmt.Errorf("channel %q: minimax accepted the task without a task_id", up.Channel)
	}
	return created.TaskID, nil
}

// PollTask implements adapters.TaskProvider: a finished task's file id is
// resolved to its download URL at once.
func (a Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	base := strings.TrimRight(up.BaseURL, "/")
	hr, err := adapters.NewTaskGet(ctx, base+"/v1/query/video_generation?"+url.Values{"task_id": {upstreamID}}.Encode())
	if err != nil {
		return nil, err
	}
	var q struct {
		TaskID string   `json:"task_id"`
		Status string   `json:"status"`
		FileID string   `json:"file_id"`
		Base   baseResp `json:"base_resp"`
	}
	// a failed task may carry its reason as a nonzero base_resp
	if err := a.call(do, up, hr, "reading the task", &q, "Fail"); err != nil {
		return nil, err
	}
	st := &adapters.TaskState{}
	switch q.Status {
	case "Preparing", "Queueing":
		st.Status = adapters.TaskNotStarted
	case "Processing":
		st.Status = adapters.TaskRunning
	case "Fail":
		st.Status, st.Error = adapters.TaskFailed, "minimax failed the task without a reason"
		if q.Base.StatusMsg != "" && q.Base.StatusMsg != "success" {
			st.Error = q.Base.StatusMsg
		}
	case "Success":
		if q.FileID == "" {
			return nil, fmt.Errorf("channel %q: minimax says task %s succeeded but gives no file_id", up.Channel, upstreamID)
		}
		link, err := a.resolve(ctx, do, up, q.FileID)
		if err != nil {
			return nil, err
		}
		st.Status, st.Progress = adapters.TaskFinished, 100
		st.Files = []adapters.TaskFile{{URL: link, Type: adapters.FileVideo}}
	default:
		return nil, fmt.Errorf("channel %q: minimax reports task %s as %q, a status it does not document", up.Channel, upstreamID, q.Status)
	}
	return st, nil
}

// resolve turns a file id into its download URL.
func (a Adapter) resolve(ctx context.Context, do adapters.Doer, up *adapters.Upstream, fileID string) (string, error) {
	query := url.Values{"file_id": {fileID}}
	if a.GroupID != "" {
		query.Set("GroupId", a.GroupID)
	}
	hr, err := adapters.NewTaskGet(ctx, strings.TrimRight(up.BaseURL, "/")+"/v1/files/retrieve?"+query.Encode())
	if err != nil {
		return "", err
	}
	var f struct {
		File struct {
			DownloadURL string `json:"download_url"`
		} `json:"file"`
	}
	if err := a.call(do, up, hr, "resolving the video's file", &f); err != nil {
		return "", err
	}
	if f.File.DownloadURL == "" {
		return "", fmt.Errorf("channel %q: minimax gives file %s no download_url", up.Channel, fileID)
	}
	return f.File.DownloadURL, nil
}

// call sends hr with the key and decodes a successful answer into out; a
// 200 whose base_resp says otherwise is the refusal it names, unless the
// answer's status is failStatus (a task that failed, with its reason).
func (a Adapter) call(do adapters.Doer, up *adapters.Upstream, hr *http.Request, what string, out any, failStatus ...string) error {
	hr.Header.Set("Authorization", "Bearer "+up.Key)
	status, body, err := adapters.TaskCallOK(do, up, hr, what, a.DecodeError)
	if err != nil {
		return err
	}
	var verdict struct {
		Status   string    `json:"status"`
		BaseResp *baseResp `json:"base_resp"`
	}
	if err := json.Unmarshal(body, &verdict); err != nil || verdict.BaseResp == nil {
		return fmt.Errorf("channel %q: %s: minimax's answer carries no base_resp", up.Channel, what)
	}
	if verdict.BaseResp.StatusCode != 0 && (len(failStatus) == 0 || verdict.Status != failStatus[0]) {
		return codeError(status, verdict.BaseResp)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("channel %q: %s: minimax's answer: %w", up.Channel, what, err)
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
