package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Veo runs as a long-running operation of the Gemini API: POST
// /v1beta/models/{model}:predictLongRunning takes {"instances": [{prompt,
// image}], "parameters": {...}} and answers an operation whose name GET
// /v1beta/{name} reports on: done, then error or
// response.generateVideoResponse.generatedSamples[].video.uri, a file
// that only the key's project may download. It takes no callback URL: the
// gateway polls it.

// veoInstance is one predictLongRunning instance.
type veoInstance struct {
	Prompt string    `json:"prompt,omitempty"`
	Image  *veoImage `json:"image,omitempty"`
}

type veoImage struct {
	BytesBase64Encoded string `json:"bytesBase64Encoded"`
	MimeType           string `json:"mimeType"`
}

// veoParameters are the parameters the task endpoint's common fields set;
// the client's metadata adds the vendor's others (personGeneration,
// enhancePrompt, ...), and its lastFrame, video and referenceImages go to
// the instance. The Gemini API takes no seed (Vertex AI's Veo does).
type veoParameters struct {
	AspectRatio     string `json:"aspectRatio,omitempty"`
	NegativePrompt  string `json:"negativePrompt,omitempty"`
	DurationSeconds int    `json:"durationSeconds,omitempty"`
	Resolution      string `json:"resolution,omitempty"`
}

// operation is a Gemini API long-running operation.
type operation struct {
	Name  string       `json:"name"`
	Done  bool         `json:"done"`
	Error *errorDetail `json:"error"`
	// Response is the finished operation's result.
	Response *struct {
		GenerateVideoResponse *struct {
			GeneratedSamples []struct {
				Video *struct {
					URI string `json:"uri"`
				} `json:"video"`
			} `json:"generatedSamples"`
			RaiMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
			RaiMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
		} `json:"generateVideoResponse"`
	} `json:"response"`
}

// CallbackCapable implements adapters.TaskProvider: Veo is polled.
func (Adapter) CallbackCapable() bool { return false }

// OwnedFields implements adapters.TaskProvider: metadata goes into
// parameters, where the duration and the number of videos change what a
// task costs; they come from the task's own duration, one video a task.
func (Adapter) OwnedFields() []string {
	return []string{"model", "durationSeconds", "sampleCount"}
}

// SubmitTask implements adapters.TaskProvider.
func (a Adapter) SubmitTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, t *adapters.TaskRequest) (string, error) {
	// refused here too, as every task family does, whatever the caller did
	if err := adapters.RefuseOwned(t.Metadata, a.OwnedFields(), "Veo"); err != nil {
		return "", err
	}
	if t.Seed != nil {
		return "", adapters.BadRequest("Veo on the Gemini API takes no seed")
	}
	inst := veoInstance{Prompt: t.Prompt}
	if t.Image != "" {
		img, err := adapters.TaskImageBytes(ctx, t.Image)
		if err != nil {
			return "", err
		}
		inst.Image = &veoImage{BytesBase64Encoded: base64.StdEncoding.EncodeToString(img.Data), MimeType: img.MediaType}
	}
	params := veoParameters{AspectRatio: t.AspectRatio, NegativePrompt: t.NegativePrompt, DurationSeconds: t.Duration}
	switch t.Size {
	case "":
	case "720p", "1080p":
		params.Resolution = t.Size
	default:
		return "", adapters.BadRequest("size %q is not a resolution Veo makes: use 720p or 1080p, and aspect_ratio 16:9 or 9:16", t.Size)
	}
	instMeta, paramMeta, err := splitVeoMetadata(t.Metadata)
	if err != nil {
		return "", err
	}
	ib, err := json.Marshal(inst)
	if err != nil {
		return "", err
	}
	if ib, err = adapters.MergeTaskMetadata(ib, instMeta); err != nil {
		return "", err
	}
	pb, err := json.Marshal(params)
	if err != nil {
		return "", err
	}
	if pb, err = adapters.MergeTaskMetadata(pb, paramMeta); err != nil {
		return "", err
	}
	body, err := json.Marshal(map[string]any{"instances": []json.RawMessage{ib}, "parameters": json.RawMessage(pb)})
	if err != nil {
		return "", err
	}
	u := strings.TrimRight(up.BaseURL, "/") + "/v1beta/models/" + url.PathEscape(up.Model) + ":predictLongRunning"
	req, err := adapters.NewJSONRequest(ctx, u, body, false)
	if err != nil {
		return "", err
	}
	op, err := operationCall(do, req, up.Key)
	if err != nil {
		return "", err
	}
	if !validOperationName(op.Name) {
		return "", adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the Gemini API answered an operation without a usable name")
	}
	return op.Name, nil
}

// veoInstanceFields are the metadata members that belong to the instance
// (the inputs beside the prompt and first frame), not to parameters.
var veoInstanceFields = map[string]bool{"lastFrame": true, "video": true, "referenceImages": true}

// splitVeoMetadata sorts the client's metadata into instance members and
// parameters.
func splitVeoMetadata(meta json.RawMessage) (instance, params json.RawMessage, err error) {
	if len(meta) == 0 {
		return nil, nil, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(meta, &members); err != nil {
		return nil, nil, adapters.BadRequest("metadata must be a JSON object of the vendor's own options")
	}
	in, pa := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for k, v := range members {
		if veoInstanceFields[k] {
			in[k] = v
		} else {
			pa[k] = v
		}
	}
	if instance, err = json.Marshal(in); err != nil {
		return nil, nil, err
	}
	params, err = json.Marshal(pa)
	return instance, params, err
}

// validOperationName accepts the relative resource names the API gives
// (models/{model}/operations/{id}), nothing that leaves /v1beta/.
func validOperationName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "?#\\%") {
		return false
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// PollTask implements adapters.TaskProvider.
func (Adapter) PollTask(ctx context.Context, do adapters.Doer, up *adapters.Upstream, upstreamID string) (*adapters.TaskState, error) {
	if !validOperationName(upstreamID) {
		return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "%q is not a Gemini API operation name", upstreamID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(up.BaseURL, "/")+"/v1beta/"+upstreamID, nil)
	if err != nil {
		return nil, err
	}
	op, err := operationCall(do, req, up.Key)
	if err != nil {
		return nil, err
	}
	switch {
	case !op.Done:
		return &adapters.TaskState{Status: adapters.TaskRunning}, nil
	case op.Error != nil:
		msg := op.Error.Message
		if msg == "" {
			msg = "the operation failed"
		}
		return &adapters.TaskState{Status: adapters.TaskFailed, Error: msg}, nil
	}
	st := &adapters.TaskState{Status: adapters.TaskFinished, Progress: 100}
	if op.Response != nil && op.Response.GenerateVideoResponse != nil {
		r := op.Response.GenerateVideoResponse
		for _, s := range r.GeneratedSamples {
			if s.Video != nil && s.Video.URI != "" {
				st.Files = append(st.Files, adapters.TaskFile{URL: s.Video.URI, Type: adapters.FileVideo})
			}
		}
		if len(st.Files) == 0 && r.RaiMediaFilteredCount > 0 {
			reason := "the video was blocked by the vendor's safety filters"
			if len(r.RaiMediaFilteredReasons) > 0 {
				reason += ": " + strings.Join(r.RaiMediaFilteredReasons, "; ")
			}
			return &adapters.TaskState{Status: adapters.TaskFailed, Error: reason}, nil
		}
	}
	if len(st.Files) == 0 {
		return &adapters.TaskState{Status: adapters.TaskFailed, Error: "the operation finished without a video"}, nil
	}
	return st, nil
}

// FetchFile implements adapters.TaskFetcher. The key goes only to the
// channel's own host: a file URI elsewhere is refused rather than sent it.
func (Adapter) FetchFile(ctx context.Context, up *adapters.Upstream, upstreamID string, file adapters.TaskFile) (*http.Request, error) {
	fu, err := url.Parse(file.URL)
	base, berr := url.Parse(up.BaseURL)
	if err != nil || berr != nil || fu.Scheme != base.Scheme || !strings.EqualFold(fu.Host, base.Host) {
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the video's address is not on the channel's host, so the channel's key is not sent to it")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fu.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-goog-api-key", up.Key)
	return req, nil
}

// operationCall sends an operations request and decodes the operation it
// answers; a non-2xx answer is the Gemini API's error.
func operationCall(do adapters.Doer, req *http.Request, key string) (*operation, error) {
	req.Header.Set("x-goog-api-key", key)
	// the answer bounded, as every task call's
	status, body, err := adapters.TaskCall(do, req)
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, DecodeError(status, body)
	}
	var op operation
	if err := json.Unmarshal(body, &op); err != nil {
		return nil, adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the Gemini API answered something that is not an operation")
	}
	return &op, nil
}

// Interface guards.
var (
	_ adapters.TaskProvider = Adapter{}
	_ adapters.TaskFetcher  = Adapter{}
)
