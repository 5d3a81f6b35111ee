package openai

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// OpenAI's media endpoints: images (images.go) and audio (audio.go). JSON
// bodies (image generations, speech) go upstream byte for byte but for the
// model; multipart uploads (image edits, transcriptions) are re-written
// part by part, in the client's order, from the gateway's spooled form,
// with only the model (and a transcription's response_format, see
// audio.go) replaced.

// isEditPath tells an image edit from a generation by its path.
func isEditPath(r *http.Request) bool {
	return r != nil && r.URL.Path == "/v1/images/edits"
}

// decodeMedia reads a JSON media body: an image generation or speech. An
// edit or a transcription must be multipart.
func decodeMedia(req *adapters.Request, body []byte, r *http.Request) error {
	switch {
	case req.Op == adapters.OpImage && !isEditPath(r):
		return decodeImageGeneration(req, body)
	case req.Op == adapters.OpSpeech:
		return decodeSpeech(req, body)
	}
	ct := ""
	if r != nil {
		ct = r.Header.Get("Content-Type")
	}
	if ct == "" {
		ct = "none"
	}
	what := "the audio as a 'file' part"
	if req.Op == adapters.OpImage {
		what = "the image as an 'image' file part"
	}
	return adapters.BadRequest("%s takes a multipart/form-data body with %s, not Content-Type %s", pathOf(r), what, ct)
}

func pathOf(r *http.Request) string {
	if r == nil {
		return "this endpoint"
	}
	return r.URL.Path
}

// DecodeUpload implements adapters.UploadDecoder: image edits and
// transcriptions.
func (Adapter) DecodeUpload(op adapters.Operation, form *adapters.Form, r *http.Request) (*adapters.Request, error) {
	req := &adapters.Request{Op: op, Dialect: Name}
	if r != nil {
		req.Header = r.Header
	}
	var err error
	switch {
	case op == adapters.OpImage && isEditPath(r):
		err = decodeImageEdit(req, form)
	case op == adapters.OpTranscription:
		err = decodeTranscription(req, form)
	default:
		return nil, adapters.BadRequest("%s takes a JSON body (Content-Type: application/json), not multipart/form-data", pathOf(r))
	}
	if err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, adapters.BadRequest("'model' is required: add a 'model' field naming the model to use (GET /v1/models lists the models your key may use)")
	}
	return req, nil
}

// formInt reads an optional integer field.
func formInt(form *adapters.Form, name string) (*int64, error) {
	v, ok := form.Value(name)
	if !ok || v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return nil, adapters.BadRequest("'%s' must be an integer, not %q", name, v)
	}
	return &n, nil
}

// ServesMedia implements adapters.MediaProvider: OpenAI serves every
// media endpoint.
func (Adapter) ServesMedia(req *adapters.Request) bool {
	switch req.Op {
	case adapters.OpImage, adapters.OpSpeech, adapters.OpTranscription:
		return req.Dialect == Name
	}
	return false
}

// newMediaRequest builds the upstream request of a media call.
func newMediaRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Dialect != Name {
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type openai", req.Op)
	}
	base := strings.TrimRight(up.BaseURL, "/")
	var hr *http.Request
	var err error
	switch {
	case req.Media.Form != nil:
		path := "/v1/audio/transcriptions"
		if req.Op == adapters.OpImage {
			path = "/v1/images/edits"
		}
		replace := map[string]string{"model": up.Model}
		if req.Op == adapters.OpTranscription {
			if f := upstreamTranscriptionFormat(req.Media.ResponseFormat); f != req.Media.ResponseFormat {
				replace["response_format"] = f
			}
		}
		body, ct := multipartBody(req.Media.Form, replace)
		if hr, err = adapters.NewBodyRequest(ctx, base+path, ct, body); err != nil {
			body.Close()
		}
	default:
		path := "/v1/images/generations"
		if req.Op == adapters.OpSpeech {
			path = "/v1/audio/speech"
		}
		body := req.Raw
		if up.Model != req.Model {
			if body, err = adapters.SetFields(req.Raw, adapters.Field{Key: "model", Value: up.Model}); err != nil {
				return nil, err
			}
		}
		hr, err = adapters.NewJSONRequest(ctx, base+path, body, false)
	}
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	return hr, nil
}

// multipartBody writes the form through a pipe, its fields as sent but
// for those in replace (a replaced field sent twice is written once), its
// files copied from the gateway's spool as the upstream reads them. The
// transport closes the returned body when the request ends, which stops
// the writer.
func multipartBody(form *adapters.Form, replace map[string]string) (io.ReadCloser, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeForm(mw, form, replace))
	}()
	return pr, mw.FormDataContentType()
}

func writeForm(mw *multipart.Writer, form *adapters.Form, replace map[string]string) error {
	written := map[string]bool{}
	for _, p := range form.Parts {
		if p.File == nil {
			v := p.Value
			if r, ok := replace[p.Name]; ok {
				if written[p.Name] {
					continue
				}
				written[p.Name], v = true, r
			}
			if err := mw.WriteField(p.Name, v); err != nil {
				return err
			}
			continue
		}
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, escapeQuotes(p.Name), escapeQuotes(p.File.Filename)))
		ct := p.File.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		w, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		f, err := p.File.Open()
		if err != nil {
			return err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	for name, v := range replace {
		if !written[name] {
			if err := mw.WriteField(name, v); err != nil {
				return err
			}
		}
	}
	return mw.Close()
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

func escapeQuotes(s string) string { return quoteEscaper.Replace(s) }

// DecodeMediaResponse implements adapters.MediaProvider.
func (Adapter) DecodeMediaResponse(req *adapters.Request, body []byte) (*adapters.MediaResponse, error) {
	if req.Op == adapters.OpTranscription {
		return decodeTranscriptionResponse(req, body)
	}
	return decodeImagesResponse(body)
}

// EncodeMediaResponse implements adapters.MediaEncoder.
func (Adapter) EncodeMediaResponse(req *adapters.Request, resp *adapters.MediaResponse) ([]byte, string, error) {
	if req.Op == adapters.OpTranscription {
		return encodeTranscription(req, resp)
	}
	return encodeImages(resp)
}

var (
	_ adapters.MediaProvider = Adapter{}
	_ adapters.MediaEncoder  = Adapter{}
	_ adapters.UploadDecoder = Adapter{}
)
