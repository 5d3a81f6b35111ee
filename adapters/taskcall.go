package adapters

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Helpers the task families share: one JSON call through a Doer with its
// answer bounded, the owned members of a client's metadata refused, and the
// first-frame image in the two spellings vendors take by reference.

// MaxTaskAnswer bounds a task vendor's JSON answer (a submit receipt, a
// status, a file record): a few KiB in practice.
const MaxTaskAnswer = 1 << 20

// TaskCall sends hr through do and returns the answer's status and body,
// read up to MaxTaskAnswer bytes; a longer answer is an error, not a cut one.
func TaskCall(do Doer, hr *http.Request) (int, []byte, error) {
	resp, err := do.Do(hr)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxTaskAnswer+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the upstream's answer: %w", err)
	}
	if len(body) > MaxTaskAnswer {
		return resp.StatusCode, nil, fmt.Errorf("the upstream's answer is larger than %d bytes", MaxTaskAnswer)
	}
	return resp.StatusCode, body, nil
}

// TaskCallOK sends hr as TaskCall does and answers a status other than 2xx
// with the vendor's own error (decodeError: the provider's DecodeError); a
// call that did not complete is wrapped with the channel and what it asked.
func TaskCallOK(do Doer, up *Upstream, hr *http.Request, what string, decodeError func(int, []byte) *Error) (int, []byte, error) {
	status, body, err := TaskCall(do, hr)
	if err != nil {
		return status, nil, TaskError(up, what, err)
	}
	if status < 200 || status > 299 {
		if e := decodeError(status, body); e != nil {
			return status, body, e
		}
		return status, body, fmt.Errorf("channel %q: %s: the upstream answered %d", up.Channel, what, status)
	}
	return status, body, nil
}

// NewTaskGet builds an upstream GET of a JSON resource.
func NewTaskGet(ctx context.Context, url string) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Accept", "application/json")
	return hr, nil
}

// RefuseOwned returns a 400 naming the first member of metadata that the
// family's native body owns, or nil. SubmitTask checks it itself as well,
// so a family is safe whatever its caller did.
func RefuseOwned(metadata json.RawMessage, owned []string, vendor string) error {
	if len(bytes.TrimSpace(metadata)) == 0 {
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &members); err != nil {
		if bytes.Equal(bytes.TrimSpace(metadata), []byte("null")) {
			return nil
		}
		return BadRequest("metadata must be a JSON object")
	}
	for _, k := range owned {
		if _, ok := members[k]; ok {
			e := BadRequest("metadata.%s is set by the gateway for %s from the request's own fields; remove it from metadata", k, vendor)
			e.Param = "metadata." + k
			return e
		}
	}
	return nil
}

// TaskImageURL returns a first-frame image as a URL: an http(s) or data:
// URL as it is, bare base64 as a data: URL of the type its bytes show.
func TaskImageURL(image string) (string, error) {
	if isHTTPURL(image) || strings.HasPrefix(image, "data:") {
		if strings.HasPrefix(image, "data:") {
			if _, _, err := splitDataURL(image); err != nil {
				return "", err
			}
		}
		return image, nil
	}
	data, err := decodeBase64(image)
	if err != nil {
		return "", err
	}
	mt := http.DetectContentType(data)
	if !strings.HasPrefix(mt, "image/") {
		return "", BadRequest("image is base64 but not of an image (its bytes look like %s); send a PNG, JPEG or WebP", mt)
	}
	return "data:" + mt + ";base64," + image, nil
}

// TaskImageBase64 returns a first-frame image as an http(s) URL or as bare
// base64 (a data: URL loses its prefix), for vendors that take no data: URL.
func TaskImageBase64(image string) (string, error) {
	if isHTTPURL(image) {
		return image, nil
	}
	if strings.HasPrefix(image, "data:") {
		_, b64, err := splitDataURL(image)
		return b64, err
	}
	if _, err := decodeBase64(image); err != nil {
		return "", err
	}
	return image, nil
}

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

func splitDataURL(s string) (mediaType, b64 string, err error) {
	head, b64, ok := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	mediaType, isB64 := strings.CutSuffix(head, ";base64")
	if !ok || !isB64 || !strings.HasPrefix(mediaType, "image/") {
		return "", "", BadRequest("image is a data: URL but not data:image/<type>;base64,<data>")
	}
	if _, err := decodeBase64(b64); err != nil {
		return "", "", err
	}
	return mediaType, b64, nil
}

func decodeBase64(s string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(data) == 0 {
		return nil, BadRequest("image must be an http(s) URL, a data: URL or base64 of an image")
	}
	return data, nil
}

// TaskError turns err from a Doer into the error SubmitTask and PollTask
// return: an *Error as it is, anything else wrapped with the channel's name
// (a transport failure, the caller's deadline).
func TaskError(up *Upstream, what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return fmt.Errorf("channel %q: %s: %w", up.Channel, what, err)
}

// MarshalTaskBody encodes a native submit body without escaping <, > and &,
// so a callback URL's query reaches the vendor as the client wrote it.
func MarshalTaskBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding the task: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
