package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// OpenAI's video API (Sora) runs as a task: POST /v1/videos takes a
// multipart form (model, prompt, seconds, size, input_reference as a file)
// and answers a video job; GET /v1/videos/{id} reports its status
// (queued, in_progress, completed, failed) and progress; the finished MP4
// is at GET /v1/videos/{id}/content, for the key's owner only. It takes no
// callback URL: the gateway polls it.

// video is OpenAI's video job object.
type video struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Model    string `json:"model"`
	Status   string `json:"status"`
	Progress *int   `json:"progress"`
	Seconds  string `json:"seconds"`
	Size     string `json:"size"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// soraSizes maps the task endpoint's aspect ratios to Sora's sizes.
var soraSizes = map[string]string{"16:9": "1280x720", "9:16": "720x1280"}

// CallbackCapable implements adapters.TaskProvider: Sora is polled.
func (Adapter) CallbackCapable() bool { return false }

// OwnedFields implements adapters.TaskProvider: the model is billed by
// the gateway, and seconds and size change what a video costs, so they
// come from the task's own duration and size, not from metadata.
func (Adapter) OwnedFields() []string {
	return []string{"model", "prompt", "seconds", "size", "input_reference"}
}

// SubmitTask implements adapters.TaskProvider.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	// refused here too, as every task family does, whatever the caller did
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), "OpenAI's video API"); err != nil {
		return "", err
	}
	if t.NegativePrompt != "" {
		return "", adapters.BadRequest("OpenAI's video API takes no negative_prompt: say what to avoid in the prompt")
	}
	if t.Seed != nil {
		return "", adapters.BadRequest("OpenAI's video API takes no seed")
	}
	size := t.Size
	if size == "" && t.AspectRatio != "" {
		var ok bool
		if size, ok = soraSizes[t.AspectRatio]; !ok {
			return "", adapters.BadRequest("aspect_ratio %q is not one OpenAI's video API makes: use 16:9 or 9:16, or a size such as 1280x720", t.AspectRatio)
		}
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fields := [][2]string{{"model", up.Model}, {"prompt", t.Prompt}}
	if t.Duration > 0 {
		fields = append(fields, [2]string{"seconds", strconv.Itoa(t.Duration)})
	}
	if size != "" {
		fields = append(fields, [2]string{"size", size})
	}
	extra, err := metadataFormFields(t.Metadata)
	if err != nil {
		return "", err
	}
	for _, f := range append(fields, extra...) {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return "", err
		}
	}
	if t.Image != "" {
		img, err := adapters.TaskImageBytes(ctx, t.Image)
		if err != nil {
			return "", err
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="input_reference"; filename="input_reference`+imageExt(img.MediaType)+`"`)
		h.Set("Content-Type", img.MediaType)
		part, err := mw.CreatePart(h)
		if err != nil {
			return "", err
		}
		if _, err := part.Write(img.Data); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(up.BaseURL, "/")+"/v1/videos", &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	v, err := videoCall(do, req, up.Key)
	if err != nil {
		return "", err
	}
	return v.ID, nil
}

// PollTask implements adapters.TaskProvider.
func (Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, videoURL(up, upstreamID), nil)
	if err != nil {
		return nil, err
	}
	v, err := videoCall(do, req, up.Key)
	if err != nil {
		return nil, err
	}
	st := &adapters.TaskState{}
	if v.Progress != nil {
		st.Progress = *v.Progress
	}
	switch v.Status {
	case "queued":
		st.Status = adapters.TaskNotStarted
	case "in_progress":
		st.Status = adapters.TaskRunning
	case "completed":
		st.Status = adapters.TaskFinished
		st.Files = []adapters.TaskFile{{URL: videoURL(up, upstreamID) + "/content", Type: adapters.FileVideo}}
		if s, err := strconv.ParseFloat(v.Seconds, 64); err == nil && s > 0 {
			st.Seconds = s
		}
	case "failed":
		st.Status = adapters.TaskFailed
		if v.Error != nil {
			st.Error = v.Error.Message
			if v.Error.Code != "" {
				st.Error = v.Error.Code + ": " + v.Error.Message
			}
		}
	default:
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "OpenAI's video API reported the unknown status %q", v.Status)
	}
	return st, nil
}

// FetchFile implements adapters.TaskFetcher: the content endpoint wants
// the channel's key.
func (Adapter) FetchFile(ctx context.Context, up *adapters.Upstream, upstreamID string, file adapters.TaskFile) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, videoURL(up, upstreamID)+"/content", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+up.Key)
	return req, nil
}

func videoURL(up *adapters.Upstream, id string) string {
	return strings.TrimRight(up.BaseURL, "/") + "/v1/videos/" + url.PathEscape(id)
}

// videoCall sends a video API request and decodes the job it answers; a
// non-2xx answer is OpenAI's error.
func videoCall(do adapters.Doer, req *http.Request, key string) (*video, error) {
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	// the answer bounded, as every task call's
	status, body, err := adapters.TaskCall(do, req)
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, DecodeError(status, body)
	}
	var v video
	if err := json.Unmarshal(body, &v); err != nil || v.ID == "" {
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "OpenAI's video API answered something that is not a video job")
	}
	return &v, nil
}

// metadataFormFields turns the client's metadata members into form
// fields: a string as it is, any other value as its JSON text.
func metadataFormFields(meta json.RawMessage) ([][2]string, error) {
	if len(meta) == 0 {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(meta, &members); err != nil {
		return nil, adapters.BadRequest("metadata must be a JSON object of the vendor's own options")
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		v := string(members[k])
		var s string
		if json.Unmarshal(members[k], &s) == nil {
			v = s
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func imageExt(mediaType string) string {
	switch mediaType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	}
	return ""
}

// Interface guards.
var (
	_ adapters.TaskProvider = Adapter{}
	_ adapters.TaskFetcher  = Adapter{}
)
