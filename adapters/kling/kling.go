// Package kling is the Kling video family (channel type "kling"): Kuaishou
// Kling's task API, text-to-video at {base_url}/v1/videos/text2video and
// image-to-video at {base_url}/v1/videos/image2video, each task then read at
// its endpoint's path plus /{task_id}. Every call carries a short-lived JWT
// (HS256, iss = the access key, signed with the secret key) that the adapter
// signs from the channel's key, written `<access key>:<secret key>`. It has
// the task capability only, so no relayed operation reaches it. It registers
// the Caddy module gateway.adapters.kling and must not import caddymodule or
// store.
package kling

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "kling"

// DefaultTokenTTL is how long a signed token is valid: Kling's own
// examples sign for 30 minutes.
const DefaultTokenTTL = 30 * time.Minute

// the two task endpoints; an upstream task id is "<endpoint>/<Kling's id>"
// because Kling reads a task back only at the endpoint that made it.
const (
	textToVideo  = "text2video"
	imageToVideo = "image2video"
)

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Kling provider.
type Adapter struct {
	// TokenTTL is the lifetime of each signed JWT. Default 30m.
	TokenTTL caddy.Duration `json:"token_ttl,omitempty"`

	now func() time.Time // the clock tokens are signed against; tests set it
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters." + Name,
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Provision fills the defaults.
func (a *Adapter) Provision(caddy.Context) error {
	if a.TokenTTL == 0 {
		a.TokenTTL = caddy.Duration(DefaultTokenTTL)
	}
	return nil
}

// Validate refuses a lifetime Kling cannot use.
func (a *Adapter) Validate() error {
	if a.TokenTTL < 0 || (a.TokenTTL > 0 && time.Duration(a.TokenTTL) < time.Minute) {
		return fmt.Errorf("kling: token_ttl must be at least 1m")
	}
	return nil
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type kling {
//		token_ttl <duration>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		if opt != "token_ttl" {
			return d.Errf("unrecognized kling adapter option %q (it takes token_ttl)", opt)
		}
		ttl, err := caddy.ParseDuration(v)
		if err != nil || ttl < time.Minute {
			return d.Errf("kling token_ttl must be a duration of at least 1m, such as 30m")
		}
		a.TokenTTL = caddy.Duration(ttl)
		return nil
	})
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// envelope is every Kling answer: code 0 is success.
type envelope struct {
	Code      *int            `json:"code"`
	Message   string          `json:"message"`
	RequestID string          `json:"request_id"`
	Data      json.RawMessage `json:"data"`
}

// DecodeError implements adapters.Provider: Kling's {code, message,
// request_id}. Codes 1000-1004 are the token, 1100-1103 the account; both
// are the channel's fault, not the request's.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	var env envelope
	if json.Unmarshal(body, &env) != nil || env.Code == nil {
		return &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status), Message: fmt.Sprintf("kling answered HTTP %d", status)}
	}
	return codeError(status, *env.Code, env.Message)
}

func codeError(status, code int, message string) *adapters.Error {
	if status < 400 {
		// a refusal inside a 200 answer: Kling's code says whose
		status = http.StatusBadRequest
		switch {
		case code >= 1000 && code < 1100:
			status = http.StatusUnauthorized
		case code >= 1100 && code < 1200:
			status = http.StatusForbidden
		case code >= 1302 && code < 1400:
			status = http.StatusTooManyRequests
		case code >= 5000:
			status = http.StatusInternalServerError
		}
	}
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status), Code: strconv.Itoa(code), Message: message}
	if e.Message == "" {
		e.Message = fmt.Sprintf("kling refused the task (code %d)", code)
	}
	if code >= 1000 && code < 1200 {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// CallbackCapable implements adapters.TaskProvider: Kling takes
// callback_url on both endpoints.
func (Adapter) CallbackCapable() bool { return true }

// OwnedFields implements adapters.TaskProvider: the model, and what the
// price follows (the length; the std/pro mode and, on models that make
// it, sound, which Kling bills at higher rates).
func (Adapter) OwnedFields() []string { return []string{"model_name", "duration", "mode", "sound"} }

// imageOnly are the models Kling serves at image2video only (its
// capability map lists no text-to-video for them).
var imageOnly = map[string]bool{"kling-v1-5": true, "kling-v2-1": true}

// submitBody is the common part of Kling's two submit bodies.
type submitBody struct {
	ModelName      string `json:"model_name"`
	Prompt         string `json:"prompt,omitempty"`
	NegativePrompt string `json:"negative_prompt,omitempty"`
	Image          string `json:"image,omitempty"`
	AspectRatio    string `json:"aspect_ratio,omitempty"`
	Duration       string `json:"duration,omitempty"`
	CallbackURL    string `json:"callback_url,omitempty"`
}

// SubmitTask implements adapters.TaskProvider.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), Name); err != nil {
		return "", err
	}
	if t.Seed != nil {
		return "", adapters.BadRequest("kling takes no seed; remove seed")
	}
	if t.Size != "" {
		return "", adapters.BadRequest("kling takes no size; give aspect_ratio (16:9, 9:16 or 1:1) instead")
	}
	if t.Duration != 0 && t.Duration != 5 && t.Duration != 10 {
		return "", adapters.BadRequest("kling makes videos of 5 or 10 seconds, not %d; set duration to 5 or 10", t.Duration)
	}
	body := submitBody{
		ModelName:      up.Model,
		Prompt:         t.Prompt,
		NegativePrompt: t.NegativePrompt,
		CallbackURL:    t.CallbackURL,
	}
	if t.Duration != 0 {
		body.Duration = strconv.Itoa(t.Duration)
	}
	endpoint := textToVideo
	if t.Image != "" {
		if t.AspectRatio != "" {
			return "", adapters.BadRequest("kling's image-to-video takes the image's own aspect ratio; remove aspect_ratio")
		}
		img, err := adapters.TaskImageBase64(t.Image)
		if err != nil {
			return "", err
		}
		endpoint, body.Image = imageToVideo, img
	} else {
		if imageOnly[up.Model] {
			return "", adapters.BadRequest("kling's %s makes video from an image only: give image (text-to-video needs a model such as %s-master)", up.Model, up.Model)
		}
		if t.Prompt == "" {
			return "", adapters.BadRequest("kling's text-to-video needs a prompt")
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
	hr, err := adapters.NewJSONRequest(ctx, strings.TrimRight(up.BaseURL, "/")+"/v1/videos/"+endpoint, raw, false)
	if err != nil {
		return "", err
	}
	if err := a.authorize(hr, up); err != nil {
		return "", err
	}
	var data struct {
		TaskID string `json:"task_id"`
	}
	if err := a.call(do, up, hr, "submitting the task", &data); err != nil {
		return "", err
	}
	if data.TaskID == "" {
		return "", fmt.Errorf("channel %q: kling accepted the task without a task_id", up.Channel)
	}
	return endpoint + "/" + data.TaskID, nil
}

// taskData is data of a task query.
type taskData struct {
	TaskID        string `json:"task_id"`
	TaskStatus    string `json:"task_status"`
	TaskStatusMsg string `json:"task_status_msg"`
	TaskResult    struct {
		Videos []struct {
			ID       string `json:"id"`
			URL      string `json:"url"`
			Duration string `json:"duration"`
		} `json:"videos"`
	} `json:"task_result"`
}

// PollTask implements adapters.TaskProvider.
func (a Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	endpoint, id, ok := strings.Cut(upstreamID, "/")
	if !ok || (endpoint != textToVideo && endpoint != imageToVideo) || id == "" {
		return nil, fmt.Errorf("channel %q: %q is not a kling task id this gateway made", up.Channel, upstreamID)
	}
	hr, err := adapters.NewTaskGet(ctx, strings.TrimRight(up.BaseURL, "/")+"/v1/videos/"+endpoint+"/"+url.PathEscape(id))
	if err != nil {
		return nil, err
	}
	if err := a.authorize(hr, up); err != nil {
		return nil, err
	}
	var data taskData
	if err := a.call(do, up, hr, "reading the task", &data); err != nil {
		return nil, err
	}
	st := &adapters.TaskState{}
	switch data.TaskStatus {
	case "submitted":
		st.Status = adapters.TaskNotStarted
	case "processing":
		st.Status = adapters.TaskRunning
	case "succeed":
		st.Status, st.Progress = adapters.TaskFinished, 100
		for _, v := range data.TaskResult.Videos {
			st.Files = append(st.Files, adapters.TaskFile{URL: v.URL, Type: adapters.FileVideo})
			if s, err := strconv.ParseFloat(v.Duration, 64); err == nil {
				st.Seconds += s
			}
		}
		if len(st.Files) == 0 {
			return nil, fmt.Errorf("channel %q: kling says task %s succeeded but gives no video", up.Channel, id)
		}
	case "failed":
		st.Status, st.Error = adapters.TaskFailed, data.TaskStatusMsg
		if st.Error == "" {
			st.Error = "kling failed the task without a reason"
		}
	default:
		return nil, fmt.Errorf("channel %q: kling reports task %s as %q, a status it does not document", up.Channel, id, data.TaskStatus)
	}
	return st, nil
}

// call sends hr and decodes data of a successful answer into out.
func (a Adapter) call(do adapters.Doer, up *adapters.Upstream, hr *http.Request, what string, out any) error {
	status, body, err := adapters.TaskCallOK(do, up, hr, what, a.DecodeError)
	if err != nil {
		return err
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Code == nil {
		return fmt.Errorf("channel %q: %s: kling's answer is not its JSON envelope", up.Channel, what)
	}
	if *env.Code != 0 {
		return codeError(status, *env.Code, env.Message)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("channel %q: %s: kling's data: %w", up.Channel, what, err)
	}
	return nil
}

// authorize signs a token from the channel's key and sets it.
func (a Adapter) authorize(hr *http.Request, up *adapters.Upstream) error {
	access, secret, ok := strings.Cut(up.Key, ":")
	if !ok || access == "" || secret == "" {
		return &adapters.Error{Status: http.StatusInternalServerError, Type: adapters.ErrAPI, Fault: adapters.FaultChannel,
			Message: fmt.Sprintf("channel %q (kling): the key must be written <access key>:<secret key>", up.Channel)}
	}
	now := time.Now
	if a.now != nil {
		now = a.now
	}
	ttl := time.Duration(a.TokenTTL)
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	hr.Header.Set("Authorization", "Bearer "+SignToken(access, secret, now(), ttl))
	return nil
}

// SignToken is Kling's token: a JWT signed with HS256 whose issuer is the
// access key, valid from five seconds before now (for clock skew) for ttl.
func SignToken(access, secret string, now time.Time, ttl time.Duration) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(struct {
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
		Nbf int64  `json:"nbf"`
	}{access, now.Add(ttl).Unix(), now.Add(-5 * time.Second).Unix()})
	signing := header + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// Interface guards.
var (
	_ caddy.Module          = (*Adapter)(nil)
	_ caddy.Provisioner     = (*Adapter)(nil)
	_ caddy.Validator       = (*Adapter)(nil)
	_ caddyfile.Unmarshaler = (*Adapter)(nil)
	_ adapters.Provider     = (*Adapter)(nil)
	_ adapters.TaskProvider = (*Adapter)(nil)
)
